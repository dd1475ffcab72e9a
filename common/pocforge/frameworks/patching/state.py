"""The record an ``apply`` leaves: ``<root>/.pocforge-patches/<poc>/<framework>/state.json``.

``<root>`` is the folder holding the package (site-packages), so the record lives and dies
with the environment. It names every patch applied (with the sha256 of the patch file) and,
per file changed, the sha256 before and after: ``revert`` tells a file it may restore from
one changed since (a reinstalled framework), ``check`` tells an applied POC from a stale
one, and a run's provenance (:func:`provenance`) says whether the patched files are intact.
``complete`` is False while the files are being written, so an interrupted apply is
recognised. The saved originals sit beside it in ``backup/``
(:mod:`~pocforge.frameworks.patching.backup` writes both).

A file is identified by the sha256 of its bytes; ``None`` stands for a file that does not
exist (one a patch creates or deletes).
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from pocforge import atomic
from pocforge.frameworks.patching.files import PatchError

STATE_DIR = ".pocforge-patches"
STATE_FILE = "state.json"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FileRecord(_Model):
    path: str  # relative to the root: "vllm/collect_env.py"
    before_sha256: str | None  # None: the file did not exist
    after_sha256: str | None  # None: the patches delete it


class RecordedPatch(_Model):
    name: str  # "vllm/0001-x.patch"
    sha256: str
    description: str
    files: list[str]
    preexisting: bool = False  # already in the files, without a record: revert leaves it


class State(_Model):
    """``state.json``: what one ``apply`` did to one framework for one POC."""

    kind: Literal["pocforge-patch-state"] = "pocforge-patch-state"
    schema_version: Literal[1] = 1
    poc: str
    framework: str
    distribution: str
    version: str
    python: str
    applied_at: str
    complete: bool  # False while the files are being written: a crash leaves it False
    patches: list[RecordedPatch]
    files: list[FileRecord]


class PatchedFile(_Model):
    path: str
    sha256: str | None  # after every patch of the POC; None: deleted


class AppliedPatch(_Model):
    """One applied patch, for a run's provenance."""

    patch: str  # "vllm/0001-x.patch", relative to the POC's patches/
    sha256: str  # of the patch file as applied
    framework: str
    distribution: str
    version: str
    root: str  # the folder holding the patched package
    applied_at: str
    files: list[PatchedFile]
    intact: bool  # every file still has its recorded sha256


def folder(root: Path, poc: str, framework: str) -> Path:
    """Where one POC's record for one framework, and its ``backup/``, live."""
    return root / STATE_DIR / poc / framework


def load(root: Path, poc: str, framework: str) -> State | None:
    """The record, or None when nothing is applied; a damaged one is a :class:`PatchError`."""
    path = folder(root, poc, framework) / STATE_FILE
    if not path.exists():
        return None
    try:
        return State.model_validate_json(path.read_bytes())
    except ValueError as exc:
        raise PatchError(f"{path}: unreadable record ({exc.__class__.__name__})") from None


def save(where: Path, record: State) -> None:
    atomic.write_bytes(where / STATE_FILE, record.model_dump_json(indent=2).encode() + b"\n")


def forget(where: Path) -> None:
    """Delete a record's folder, and its POC's folder when that is left empty."""
    shutil.rmtree(where, ignore_errors=True)
    with contextlib.suppress(OSError):
        where.parent.rmdir()  # only when empty; the lock file keeps STATE_DIR itself


def contents(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def digest(data: bytes | None) -> str | None:
    return hashlib.sha256(data).hexdigest() if data is not None else None


def changed_since(root: Path, record: FileRecord, allow_before: bool = True) -> bool:
    """The file is neither as the apply left it nor (if allowed) as it was before."""
    now = digest(contents(root / record.path))
    return now != record.after_sha256 and not (allow_before and now == record.before_sha256)


def provenance(record: State, root: Path) -> list[AppliedPatch]:
    """Each patch of a complete record, with the sha256 of every file it touches now."""
    after = {r.path: r.after_sha256 for r in record.files}  # what the apply changed
    intact = not any(changed_since(root, r, allow_before=False) for r in record.files)
    return [
        AppliedPatch(
            patch=patch.name,
            sha256=patch.sha256,
            framework=record.framework,
            distribution=record.distribution,
            version=record.version,
            root=str(root),
            applied_at=record.applied_at,
            files=[
                # a file only a preexisting patch holds is not in the record: read it
                PatchedFile(path=f, sha256=after[f] if f in after else digest(contents(root / f)))
                for f in patch.files
            ],
            intact=intact,
        )
        for patch in record.patches
    ]
