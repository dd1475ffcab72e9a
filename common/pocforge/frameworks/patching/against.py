"""How a POC's patch fares on another release of its framework than the one it is pinned to.

Each patch is replayed with GNU patch's dry run on the release's source
(:mod:`~pocforge.frameworks.patching.releases`), never on an installed framework, and said
to be one of:

- ``upstream``: the release already has the change: the patch reverses cleanly there, or
  every line it adds is in the file it adds it to;
- ``applies``: it applies as written;
- ``offset``: it applies, its hunks at other lines (``--fuzz=0``), or ignoring up to two
  context lines (``fuzz``): ``pocforge patch rebase`` can rewrite it;
- ``conflicts``: a hunk does not apply, or a file it changes is gone: which hunks, at
  which lines.

Each patch is judged on the release as released, not after the patches before it: one that
builds on an earlier patch of the same POC is said to conflict where that earlier one does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from packaging.version import Version

from pocforge import atomic
from pocforge.frameworks.patching import gnu_patch, releases
from pocforge.frameworks.patching.files import PatchFile

Verdict = Literal["upstream", "applies", "offset", "conflicts"]
LABELS: dict[str, str] = {
    "upstream": "already upstream",
    "applies": "applies cleanly",
    "offset": "applies with offsets or fuzz",
    "conflicts": "conflicts",
}
_MOVED = re.compile(
    r"Hunk #(\d+) succeeded at (\d+)(?: with fuzz (\d+))?(?: \(offset (-?\d+) lines?\))?"
)
_FAILED = re.compile(r"Hunk #(\d+) FAILED at (\d+)")


@dataclass
class Against:
    patch: str  # "vllm/0001-x.patch"
    framework: str
    pinned: str  # the version the patch is written for
    release: str  # the version it was judged on
    verdict: Verdict
    detail: str = ""
    hunks: list[str] = field(default_factory=list)  # "vllm/x.py hunk #2 at line 120"

    def line(self) -> str:
        detail = f" ({self.detail})" if self.detail else ""
        return f"{self.patch}: {LABELS[self.verdict]} on {self.framework} {self.release}{detail}"

    def as_dict(self) -> dict:
        return asdict(self)


def _hunks(output: str, pattern: re.Pattern) -> list[tuple[str, re.Match]]:
    """(file, match) for each line of GNU patch's output that ``pattern`` matches."""
    found, current = [], ""
    for line in output.splitlines():
        if line.startswith(("checking file ", "patching file ")):
            current = line.split(" ", 2)[2]
        elif match := pattern.search(line):
            found.append((current, match))
    return found


def _adds_present(patch: PatchFile, root: Path) -> bool:
    """Every line the patch adds is in the release's file it adds it to (a change made
    upstream in other words than the patch's context, at other lines)."""
    added: dict[str, list[str]] = {}
    current = None
    for line in patch.path.read_text().splitlines():
        if line.startswith("+++ "):
            current = line[4:].split("\t", 1)[0].removeprefix("b/")
        elif line.startswith("+") and current:
            added.setdefault(current, []).append(line[1:].strip())
    if not added:
        return False
    for name, lines in added.items():
        target = root / name
        if not target.is_file():
            return False
        present = {one.strip() for one in target.read_text(errors="replace").splitlines()}
        if any(one and one not in present for one in lines):
            return False
    return True


def judge(patch: PatchFile, root: Path, release: str) -> Against:
    """``patch`` on the release whose source is under ``root``."""
    said = Against(patch.name, patch.framework, patch.version, release, "conflicts")
    reversed_, _ = gnu_patch.run(patch, root, reverse=True, dry_run=True)
    if reversed_ or _adds_present(patch, root):
        said.verdict = "upstream"
        said.detail = "the reverse applies cleanly" if reversed_ else "every added line is there"
        return said
    for fuzz in (0, 2):
        applied, output = gnu_patch.run(patch, root, dry_run=True, fuzz=fuzz)
        if not applied:
            continue
        moved = _hunks(output, _MOVED)
        said.hunks = [
            f"{name} hunk #{m[1]} at line {m[2]}"
            + (f" (offset {m[4]})" if m[4] else "")
            + (f" (fuzz {m[3]})" if m[3] else "")
            for name, m in moved
        ]
        said.verdict = "offset" if moved else "applies"
        said.detail = f"{len(moved)} hunk(s) moved" if moved else ""
        return said
    failed = _hunks(output, _FAILED)
    said.hunks = [f"{name} hunk #{m[1]} at line {m[2]}" for name, m in failed]
    missing = [f for f in patch.files if not (root / f).exists()]
    said.detail = (
        f"{', '.join(missing)} not in the release"
        if missing
        else "; ".join(said.hunks) or gnu_patch.failure(output)
    )
    return said


def parse_against(text: str, option: str = "--against") -> tuple[str | None, str]:
    """``vllm==0.33.0`` -> ("vllm", "0.33.0"); ``latest`` -> (None, "latest"): every
    framework's newest release. Raises ValueError with the form expected."""
    if text == "latest":
        return None, "latest"
    framework, sep, version = text.partition("==")
    if not sep or not framework or not version:
        raise ValueError(f"{option} {text!r}: expected FRAMEWORK==VERSION (vllm==0.33.0) or latest")
    return framework, version


def on_releases(
    groups: dict[str, list[PatchFile]], which: str, cache: Path, say, option: str = "--against"
) -> Iterator[tuple[list[PatchFile], Path, str]]:
    """(a framework's patches, the folder of its release's source, the release) for each
    framework of ``groups`` (per framework, as :func:`~.files.discover` gives them) that
    ``which`` names (``vllm==0.33.0``, or ``latest``: each one's newest), the source
    fetched into ``cache`` once."""
    framework, version = parse_against(which, option)
    if framework is not None and framework not in groups:
        raise ValueError(
            f"{option} {which}: the POC has no {framework} patches "
            f"(it has: {', '.join(groups) or 'none'})"
        )
    for name, patches in groups.items():
        if framework is not None and name != framework:
            continue
        release = releases.latest(name) if version == "latest" else version
        say(f"{name} {release}: its source from the package index (cached in {cache})")
        yield patches, releases.source(name, release, cache), release


def status(
    groups: dict[str, list[PatchFile]], against: str, cache: Path, say=lambda line: None
) -> list[Against]:
    """Every patch of ``groups`` judged on the release ``against`` names."""
    return [
        judge(patch, root, release)
        for patches, root, release in on_releases(groups, against, cache, say)
        for patch in patches
    ]


def record(poc: str, judged: list[Against], folder: Path) -> Path:
    """Keep ``judged`` as ``<folder>/<poc>.json``, per ``framework==release`` checked (the
    report reads the newest release checked of each framework)."""
    path = folder / f"{poc}.json"
    kept = json.loads(path.read_text()) if path.is_file() else {}
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    for release in dict.fromkeys(f"{one.framework}=={one.release}" for one in judged):
        kept[release] = {
            "checked_at": stamp,
            "patches": [
                one.as_dict() for one in judged if f"{one.framework}=={one.release}" == release
            ],
        }
    folder.mkdir(parents=True, exist_ok=True)
    atomic.write_text(path, json.dumps(kept, indent=2) + "\n")
    return path


def newest_checked(poc: str, folder: Path) -> dict[str, dict]:
    """Per patch name, its judgment on the newest release of its framework checked."""
    path = folder / f"{poc}.json"
    kept = json.loads(path.read_text()) if path.is_file() else {}
    newest: dict[str, tuple[Version, dict]] = {}
    for key, checked in kept.items():
        framework, _, release = key.partition("==")
        for one in checked["patches"]:
            seen = newest.get(one["patch"])
            if seen is None or Version(release) > seen[0]:
                newest[one["patch"]] = (
                    Version(release),
                    {**one, "checked_at": checked["checked_at"]},
                )
    return {name: one for name, (_, one) in newest.items()}
