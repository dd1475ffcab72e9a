"""Check, apply and revert a POC's patches on the installed framework, all or nothing.

How (and why):

- **Dry run first, in a scratch copy.** The files the patches touch are copied to a
  temporary folder and GNU ``patch -p1 --fuzz=0`` replays every patch there in order, so
  a patch that depends on an earlier one is checked against the earlier one's result, and
  the installed framework is not touched until every patch of every framework passed.
  ``--fuzz=0``: a patch pinned to an exact version must match its context exactly.
- **Refusal changes nothing.** A version mismatch (the header's version against the
  installed distribution's, compared as strings), a conflict or a missing framework
  refuses the whole POC.
- **The installed files are replaced, not edited.** The scratch results are written with
  a rename per file, after the originals are saved (with sha256) to
  ``<root>/.pocforge-patches/<poc>/<framework>/`` next to a ``state.json``; ``<root>`` is
  the folder holding the package (site-packages), so the record lives and dies with the
  environment. A failure mid-way restores what was written.
- **Revert restores the saved bytes** (and modification times, so stale ``.pyc`` files
  are recompiled), not ``patch -R``; it refuses when a file changed since the apply
  (a reinstalled framework) unless forced.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from pocforge.frameworks.patching.files import FRAMEWORKS, PatchError, PatchFile, discover
from pocforge.frameworks.patching.target import Installed, locate
from pocforge.spec import PocSpec

STATE_DIR = ".pocforge-patches"
Status = Literal[
    "applies",  # check: would apply cleanly
    "applied",  # already in the installed files
    "patched",  # apply: applied now
    "reverted",  # revert: the originals are back
    "not-applied",  # revert: nothing recorded
    "version-mismatch",
    "conflict",
    "not-installed",
    "stale",  # recorded state no longer matches the files or the patches
]
REFUSED: frozenset[str] = frozenset({"version-mismatch", "conflict", "not-installed", "stale"})
LABELS: dict[str, str] = {
    "applies": "applies cleanly",
    "applied": "already applied",
    "patched": "applied",
    "reverted": "reverted",
    "not-applied": "nothing to revert",
    "version-mismatch": "refused, version mismatch",
    "conflict": "refused, conflict",
    "not-installed": "refused, framework not installed",
    "stale": "refused, recorded state is stale",
}


# --------------------------------------------------------------------------- records


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


@dataclass
class PatchStatus:
    name: str  # "vllm/0001-x.patch", or the framework for lines about no patch in particular
    status: Status
    detail: str = ""

    @property
    def refused(self) -> bool:
        return self.status in REFUSED

    def line(self) -> str:
        label = LABELS[self.status]
        return f"{self.name}: {label}" + (f" ({self.detail})" if self.detail else "")


@dataclass
class Report:
    statuses: list[PatchStatus]
    changed: bool = False

    @property
    def refused(self) -> bool:
        return any(s.refused for s in self.statuses)


@dataclass
class _Plan:
    """One framework's patches against its installed files, worked out in a scratch copy."""

    framework: str
    installed: Installed | None
    patches: list[PatchFile]
    statuses: list[PatchStatus]
    state: State | None = None
    before: dict[str, bytes | None] = field(default_factory=dict)  # None: absent
    after: dict[str, bytes | None] = field(default_factory=dict)

    @property
    def changes(self) -> list[str]:
        return [p for p in self.before if self.before[p] != self.after[p]]


# --------------------------------------------------------------------------- verbs


def check(spec: PocSpec, python: str | None = None, frameworks: tuple[str, ...] = ()) -> Report:
    """Per patch: applies cleanly, already applied, version mismatch or conflict. Read-only."""
    return Report([s for plan in _plans(spec, python, frameworks) for s in plan.statuses])


def apply(spec: PocSpec, python: str | None = None, frameworks: tuple[str, ...] = ()) -> Report:
    """Apply every patch of ``spec`` or none: refused (nothing changed) if any would not apply.

    Already applied patches are left as they are, so a second ``apply`` changes nothing.
    """
    plans = _plans(spec, python, frameworks)
    report = Report([s for plan in plans for s in plan.statuses])
    if report.refused:
        return report
    done: list[_Plan] = []
    try:
        for plan in plans:
            if plan.state is None and plan.changes:
                _commit(spec.name, plan)
                done.append(plan)
    except BaseException:
        for plan in reversed(done):
            assert plan.installed is not None
            _restore(
                plan.installed.root, _load_state(plan.installed.root, spec.name, plan.framework)
            )
        raise
    for plan in done:
        for status in plan.statuses:
            if status.status == "applies":
                status.status, status.detail = "patched", plan.installed.describe()
    return Report(report.statuses, changed=bool(done))


def revert(
    spec: PocSpec,
    python: str | None = None,
    frameworks: tuple[str, ...] = (),
    force: bool = False,
) -> Report:
    """Restore the files an ``apply`` changed, byte for byte, and forget the record.

    Refused (nothing changed) when a patched file changed since, unless ``force``: then
    the saved originals are written back anyway. Patch files are not read, so a broken
    or deleted patch can still be reverted.
    """
    found: list[tuple[Installed, State]] = []
    statuses: list[PatchStatus] = []
    for framework in _recorded_frameworks(spec, frameworks):
        installed = locate(framework, python)
        state = _load_state(installed.root, spec.name, framework) if installed else None
        if installed is None or state is None:
            if frameworks or _patches_dir(spec).joinpath(framework).is_dir():
                detail = (
                    f"no record in {installed.root}"
                    if installed
                    else f"{framework} is not installed for {python or sys.executable}"
                )
                statuses.append(PatchStatus(framework, "not-applied", detail))
            continue
        changed = [r.path for r in state.files if _changed_since(installed.root, r)]
        if changed and not force:
            detail = (
                f"{changed[0]} changed since the apply of {state.applied_at}; "
                "--force writes the saved originals back anyway"
            )
            statuses += [PatchStatus(p.name, "stale", detail) for p in state.patches]
        found.append((installed, state))
    report = Report(statuses)
    if report.refused:
        return report
    for installed, state in found:
        _restore(installed.root, state)
        for patch in state.patches:
            if patch.preexisting:
                detail = "was in the files before pocforge applied the others; left as it is"
                statuses.append(PatchStatus(patch.name, "applied", detail))
            else:
                statuses.append(PatchStatus(patch.name, "reverted", installed.describe()))
    return Report(statuses, changed=bool(found))


def applied_patches(
    spec: PocSpec, python: str | None = None, frameworks: tuple[str, ...] = ()
) -> list[AppliedPatch]:
    """The patches ``apply`` recorded for ``spec`` in the target environment, for provenance:
    each patch file's sha256 and, per file it touches, the sha256 after patching; ``intact``
    says whether the files still match. Empty when nothing is applied."""
    out: list[AppliedPatch] = []
    for framework in _recorded_frameworks(spec, frameworks):
        installed = locate(framework, python)
        state = _load_state(installed.root, spec.name, framework) if installed else None
        if installed is None or state is None or not state.complete:
            continue
        after = {r.path: r.after_sha256 for r in state.files}  # what the apply changed

        def now(path: str, root: Path = installed.root) -> str | None:
            return _sha(_read(root / path))  # files a preexisting patch holds

        intact = not any(_changed_since(installed.root, r, allow_before=False) for r in state.files)
        for patch in state.patches:
            out.append(
                AppliedPatch(
                    patch=patch.name,
                    sha256=patch.sha256,
                    framework=framework,
                    distribution=state.distribution,
                    version=state.version,
                    root=str(installed.root),
                    applied_at=state.applied_at,
                    files=[
                        PatchedFile(path=f, sha256=after[f] if f in after else now(f))
                        for f in patch.files
                    ],
                    intact=intact,
                )
            )
    return out


# --------------------------------------------------------------------------- planning


def _patches_dir(spec: PocSpec) -> Path:
    if spec.source_dir is None:
        raise PatchError(f"{spec.name}: the spec was not loaded from a file, so it has no patches/")
    return spec.source_dir / "patches"


def spec_problems(spec: PocSpec) -> list[str]:
    """What is wrong with ``spec``'s patch files, read without touching any environment:
    a malformed file or folder, or a patch pinned to another version than the spec pins
    (``serving.version`` / ``training.version``). For ``pocforge validate``."""
    try:
        groups = discover(_patches_dir(spec))
    except PatchError as exc:
        return [str(exc)]
    return _pin_problems(spec, groups)


def _pin_problems(spec: PocSpec, groups: dict[str, list[PatchFile]]) -> list[str]:
    pins = {}
    if spec.serving is not None and spec.serving.version:
        pins[spec.serving.framework] = (spec.serving.version, "serving.version")
    if spec.training is not None and spec.training.version:
        pins[spec.training.framework] = (spec.training.version, "training.version")
    return [
        f"{patch.path}:1: the patch is for {framework} {patch.version} but the POC "
        f"pins {framework} {pins[framework][0]} ({pins[framework][1]})"
        for framework, patches in groups.items()
        if framework in pins
        for patch in patches
        if patch.version != pins[framework][0]
    ]


def _plans(spec: PocSpec, python: str | None, frameworks: tuple[str, ...]) -> list[_Plan]:
    groups = discover(_patches_dir(spec), frameworks)
    if problems := _pin_problems(spec, groups):
        raise PatchError(problems[0])
    if groups:
        _gnu_patch_binary()
    return [
        _plan(spec.name, framework, patches, locate(framework, python), python)
        for framework, patches in groups.items()
    ]


def _plan(
    poc: str,
    framework: str,
    patches: list[PatchFile],
    installed: Installed | None,
    python: str | None,
) -> _Plan:
    if installed is None:
        detail = f"no {framework} for {python or sys.executable}; point --python at its environment"
        statuses = [PatchStatus(p.name, "not-installed", detail) for p in patches]
        return _Plan(framework, None, patches, statuses)
    root = installed.root
    paths = list(dict.fromkeys(f for p in patches for f in p.files))
    before = {f: _read(root / f) for f in paths}
    state = _load_state(root, poc, framework)
    if state is not None:
        statuses = _recorded(state, installed, patches)
        return _Plan(framework, installed, patches, statuses, state, before, dict(before))

    statuses = []
    with tempfile.TemporaryDirectory(prefix="pocforge-patch-") as tmp:
        scratch = Path(tmp)
        for rel, data in before.items():
            if data is not None:
                (scratch / rel).parent.mkdir(parents=True, exist_ok=True)
                (scratch / rel).write_bytes(data)
        for patch in patches:
            statuses.append(_replay(patch, installed, scratch))
        after = {f: _read(scratch / f) for f in paths}
    return _Plan(framework, installed, patches, statuses, None, before, after)


def _replay(patch: PatchFile, installed: Installed, scratch: Path) -> PatchStatus:
    """Apply ``patch`` to the scratch copy if it applies; say what happened."""
    if patch.version != installed.version:
        return PatchStatus(
            patch.name,
            "version-mismatch",
            f"the patch is for {patch.framework} {patch.version}, "
            f"{installed.describe()} is installed in {installed.root}",
        )
    ok, output = _run_patch(patch, scratch, dry_run=True)
    if ok:
        ok, output = _run_patch(patch, scratch)
        if ok:
            return PatchStatus(patch.name, "applies", installed.describe())
    elif _run_patch(patch, scratch, reverse=True, dry_run=True)[0]:
        return PatchStatus(
            patch.name,
            "applied",
            "found in the installed files without a pocforge record; revert cannot undo it",
        )
    return PatchStatus(patch.name, "conflict", f"{installed.describe()}: {_failure(output)}")


def _recorded(state: State, installed: Installed, patches: list[PatchFile]) -> list[PatchStatus]:
    """Statuses when an earlier apply left a record: applied, or stale and why."""
    detail = ""
    where = _state_dir(installed.root, state.poc, state.framework)
    if not state.complete:
        detail = "an earlier apply was interrupted; `pocforge patch revert` restores the originals"
    elif installed.version != state.version:
        detail = (
            f"applied to {state.distribution} {state.version}, {installed.describe()} is "
            f"installed now; revert --force or delete {where}"
        )
    elif [(p.name, p.sha256) for p in state.patches] != [(p.name, p.sha256) for p in patches]:
        detail = "the patch files changed since they were applied; revert first, then apply"
    elif changed := [r.path for r in state.files if _changed_since(installed.root, r, False)]:
        detail = f"{changed[0]} changed since the apply of {state.applied_at}; revert --force"
    if detail:
        return [PatchStatus(p.name, "stale", detail) for p in patches]
    return [PatchStatus(p.name, "applied", f"recorded {state.applied_at}") for p in patches]


# --------------------------------------------------------------------------- GNU patch


@functools.cache
def _gnu_patch_binary() -> str:
    exe = shutil.which("patch")
    version = ""
    if exe:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, check=False)
        version = out.stdout
    if not exe or not version.startswith("GNU patch"):
        raise PatchError(
            "GNU patch is needed (`apt-get install patch`; `make setup` installs it as root)"
        )
    return exe


def _run_patch(
    patch: PatchFile, folder: Path, reverse: bool = False, dry_run: bool = False
) -> tuple[bool, str]:
    cmd = [
        _gnu_patch_binary(),
        "-p1",
        "--force",  # never ask; never guess that a patch is reversed
        "--fuzz=0",
        "--no-backup-if-mismatch",
        "--reject-file=-",
        "-d",
        str(folder),
        "-i",
        str(patch.path),
    ]
    cmd += ["--reverse"] if reverse else []
    cmd += ["--dry-run"] if dry_run else []
    out = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "LC_ALL": "C"},
        timeout=120,
        check=False,
    )
    return out.returncode == 0, out.stdout + out.stderr


def _failure(output: str) -> str:
    """The first failing line of GNU patch's output, with the file it was checking."""
    current = ""
    for line in output.splitlines():
        if line.startswith(("checking file ", "patching file ")):
            current = line.split(" ", 2)[2]
        elif any(m in line for m in ("FAILED", "can't find", "No file to", "malformed", "No such")):
            return f"{current}: {line.strip()}" if current else line.strip()
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return lines[-1] if lines else "GNU patch failed without a message"


# --------------------------------------------------------------------------- state


def _state_dir(root: Path, poc: str, framework: str) -> Path:
    return root / STATE_DIR / poc / framework


def _load_state(root: Path, poc: str, framework: str) -> State | None:
    path = _state_dir(root, poc, framework) / "state.json"
    if not path.exists():
        return None
    try:
        return State.model_validate_json(path.read_bytes())
    except ValueError as exc:
        raise PatchError(f"{path}: unreadable record ({exc.__class__.__name__})") from None


def _recorded_frameworks(spec: PocSpec, frameworks: tuple[str, ...]) -> list[str]:
    if frameworks:
        return list(frameworks)
    folder = _patches_dir(spec)
    named = sorted(d.name for d in folder.iterdir() if d.is_dir()) if folder.is_dir() else []
    return [f for f in named if f in FRAMEWORKS] or list(FRAMEWORKS)


@contextlib.contextmanager
def _lock(root: Path) -> Iterator[None]:
    """One apply or revert at a time per environment."""
    (root / STATE_DIR).mkdir(exist_ok=True)
    with open(root / STATE_DIR / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _commit(poc: str, plan: _Plan) -> None:
    """Save the originals and the record, then write the patched files; undo on failure."""
    installed = plan.installed
    assert installed is not None
    root = installed.root
    folder = _state_dir(root, poc, plan.framework)
    with _lock(root):
        for rel, data in plan.before.items():
            if _read(root / rel) != data:
                raise PatchError(f"{root / rel} changed while checking; nothing changed, try again")
        if folder.exists():
            shutil.rmtree(folder)
        for rel in plan.changes:
            if plan.before[rel] is not None:
                (folder / "backup" / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(root / rel, folder / "backup" / rel)
                if _read(folder / "backup" / rel) != plan.before[rel]:
                    raise PatchError(f"{folder / 'backup' / rel}: the saved copy differs")
        state = State(
            poc=poc,
            framework=plan.framework,
            distribution=installed.distribution,
            version=installed.version,
            python=installed.python,
            applied_at=datetime.now(UTC).isoformat(timespec="seconds"),
            complete=False,
            patches=[
                RecordedPatch(
                    name=p.name,
                    sha256=p.sha256,
                    description=p.description,
                    files=p.files,
                    preexisting=s.status == "applied",
                )
                for p, s in zip(plan.patches, plan.statuses, strict=True)
            ],
            files=[
                FileRecord(
                    path=r, before_sha256=_sha(plan.before[r]), after_sha256=_sha(plan.after[r])
                )
                for r in plan.changes
            ],
        )
        _write_state(folder, state)
        try:
            for rel in plan.changes:
                _put(root / rel, plan.after[rel], like=root / rel)
        except BaseException:
            _restore_files(root, folder, state)
            _forget(folder)
            raise
        state.complete = True
        _write_state(folder, state)


def _restore(root: Path, state: State | None) -> None:
    if state is None:
        return
    folder = _state_dir(root, state.poc, state.framework)
    with _lock(root):
        _restore_files(root, folder, state)
        _forget(folder)


def _forget(folder: Path) -> None:
    """Delete a state folder, and its POC's folder when that is left empty."""
    shutil.rmtree(folder, ignore_errors=True)
    with contextlib.suppress(OSError):
        folder.parent.rmdir()  # only when empty; the .lock keeps STATE_DIR itself


def _restore_files(root: Path, folder: Path, state: State) -> None:
    for record in state.files:
        target = root / record.path
        if _sha(_read(target)) == record.before_sha256:
            continue
        if record.before_sha256 is None:
            target.unlink(missing_ok=True)
            continue
        backup = folder / "backup" / record.path
        if _sha(_read(backup)) != record.before_sha256:
            raise PatchError(f"{backup}: the saved original is missing or damaged; cannot restore")
        _put(target, None, like=backup, copy_from=backup)
        if _sha(_read(target)) != record.before_sha256:
            raise PatchError(f"{target}: restored but its sha256 differs from the original")


def _changed_since(root: Path, record: FileRecord, allow_before: bool = True) -> bool:
    """The file is neither as the apply left it nor (if allowed) as it was before."""
    now = _sha(_read(root / record.path))
    return now != record.after_sha256 and not (allow_before and now == record.before_sha256)


def _write_state(folder: Path, state: State) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    _put(folder / "state.json", state.model_dump_json(indent=2).encode() + b"\n")


def _put(
    path: Path, data: bytes | None, like: Path | None = None, copy_from: Path | None = None
) -> None:
    """Replace ``path`` in one rename (``None``: delete it), keeping ``like``'s mode.

    ``copy_from`` copies that file instead, modification time included.
    """
    if data is None and copy_from is None:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.pocforge-{os.getpid()}")
    try:
        if copy_from is not None:
            shutil.copy2(copy_from, tmp)
        else:
            tmp.write_bytes(data or b"")
            if like is not None and like.exists():
                shutil.copymode(like, tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _sha(data: bytes | None) -> str | None:
    return hashlib.sha256(data).hexdigest() if data is not None else None
