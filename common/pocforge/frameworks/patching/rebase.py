"""A POC's patches moved to another release of their framework: each one that still applies
(cleanly, at an offset, or with fuzz) is rewritten against that release's source, pinned to
it, with its reason and header lines as they were; the file it replaces is kept beside it
(``NNNN-x.patch.pinned-<old version>``, which discovery does not read) until the engineer
removes it. A patch that conflicts is refused with its hunks and lines, one already upstream
is left as it is and said so: none is dropped without a word.
"""

from __future__ import annotations

import difflib
import itertools
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pocforge.frameworks.patching import gnu_patch
from pocforge.frameworks.patching.against import Against, judge, on_releases
from pocforge.frameworks.patching.files import HEADER_PREFIX, PatchFile


@dataclass
class Rebased:
    judged: Against
    written: Path | None = None  # the rewritten patch
    kept: Path | None = None  # the file it replaced

    @property
    def refused(self) -> bool:
        return self.judged.verdict == "conflicts"

    def line(self) -> str:
        one = self.judged
        if self.written is not None:
            return (
                f"{one.patch}: rebased onto {one.framework} {one.release} "
                f"(was {one.pinned}, kept as {self.kept.name if self.kept else '-'})"
            )
        if one.verdict == "upstream":
            return (
                f"{one.patch}: not rebased: already upstream in {one.framework} {one.release} "
                f"({one.detail}); remove it, or keep it for {one.pinned} with "
                f"'# state: merged in {one.release}'"
            )
        return f"{one.patch}: refused: conflicts on {one.framework} {one.release} ({one.detail})"


def _diff(patch: PatchFile, release: Path, patched: Path) -> list[str]:
    out: list[str] = []
    for change in patch.changes:
        if change.deleted:
            raise ValueError(f"{patch.name}: deletes {change.path}; rebase it by hand")
        before = [] if change.created else (release / change.path).read_text().splitlines(True)
        after = (patched / change.path).read_text().splitlines(True)
        out.append(f"diff --git a/{change.path} b/{change.path}\n")
        out += difflib.unified_diff(
            before,
            after,
            fromfile="/dev/null" if change.created else f"a/{change.path}",
            tofile=f"b/{change.path}",
        )
    return out


def rebase_one(patch: PatchFile, release_root: Path, release: str) -> Rebased:
    """``patch`` rewritten against the release under ``release_root``, or why not."""
    judged = judge(patch, release_root, release)
    if judged.verdict not in ("applies", "offset"):
        return Rebased(judged)
    with tempfile.TemporaryDirectory(prefix="pocforge-rebase-") as scratch:
        work = Path(scratch)
        for change in patch.changes:
            if not change.created:
                (work / change.path).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(release_root / change.path, work / change.path)
        applied, output = gnu_patch.run(patch, work, fuzz=2)
        if not applied:  # judged to apply a moment ago: the release's files are the same
            raise ValueError(f"{patch.name}: {gnu_patch.failure(output)}")
        body = _diff(patch, release_root, work)
    lines = patch.path.read_text().splitlines(True)
    header = [f"{HEADER_PREFIX} framework={patch.framework} version={release}\n"]
    header += list(itertools.takewhile(lambda line: line.startswith("#"), lines[1:]))
    kept = patch.path.with_name(f"{patch.path.name}.pinned-{patch.version}")
    shutil.copy2(patch.path, kept)
    patch.path.write_text("".join(header + body))
    return Rebased(judged, written=patch.path, kept=kept)


def rebase(
    groups: dict[str, list[PatchFile]], to: str, cache: Path, say=lambda line: None
) -> list[Rebased]:
    """Every patch of the framework ``to`` names (``vllm==0.33.0``, or ``latest`` for every
    framework's newest) moved to that release, as :func:`rebase_one` does."""
    return [
        rebase_one(patch, root, release)
        for patches, root, release in on_releases(groups, to, cache, say, option="--to")
        for patch in patches
    ]
