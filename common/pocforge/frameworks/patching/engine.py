"""Check, apply and revert a POC's patches on the installed framework, all or nothing.

The verbs, and the order they do things in:

- **Dry run first, for every framework** (:mod:`~pocforge.frameworks.patching.dry_run`):
  the installed files are not touched until every patch of every framework passed.
- **Refusal changes nothing.** A version mismatch, a conflict or a missing framework
  refuses the whole POC.
- **The installed files are replaced, not edited**
  (:mod:`~pocforge.frameworks.patching.backup`), after the originals are saved next to the
  record (:mod:`~pocforge.frameworks.patching.state`). A failure mid-way restores what was
  written, in the frameworks already done too.
- **Revert restores the saved bytes**, not ``patch -R``; it refuses when a file changed
  since the apply (a reinstalled framework) unless forced.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pocforge.frameworks.patching import backup, dry_run, gnu_patch, state
from pocforge.frameworks.patching.files import FRAMEWORKS, PatchError, PatchFile, discover
from pocforge.frameworks.patching.report import PatchStatus, Report
from pocforge.frameworks.patching.state import AppliedPatch
from pocforge.frameworks.patching.target import Installed, locate
from pocforge.spec import PocSpec


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
    done: list[dry_run.Plan] = []
    try:
        for plan in plans:
            if plan.recorded is None and plan.changes:
                assert plan.installed is not None
                record = plan.new_record(spec.name)
                backup.commit(plan.installed.root, record, plan.before, plan.after)
                done.append(plan)
    except BaseException:
        for plan in reversed(done):
            assert plan.installed is not None
            root = plan.installed.root
            if (record := state.load(root, spec.name, plan.framework)) is not None:
                backup.restore(root, record)
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
    found: list[tuple[Installed, state.State]] = []
    statuses: list[PatchStatus] = []
    for framework in _recorded_frameworks(spec, frameworks):
        installed = locate(framework, python)
        record = state.load(installed.root, spec.name, framework) if installed else None
        if installed is None or record is None:
            if frameworks or _patches_dir(spec).joinpath(framework).is_dir():
                detail = (
                    f"no record in {installed.root}"
                    if installed
                    else f"{framework} is not installed for {python or sys.executable}"
                )
                statuses.append(PatchStatus(framework, "not-applied", detail))
            continue
        changed = [r.path for r in record.files if state.changed_since(installed.root, r)]
        if changed and not force:
            detail = (
                f"{changed[0]} changed since the apply of {record.applied_at}; "
                "--force writes the saved originals back anyway"
            )
            statuses += [PatchStatus(p.name, "stale", detail) for p in record.patches]
        found.append((installed, record))
    report = Report(statuses)
    if report.refused:
        return report
    for installed, record in found:
        backup.restore(installed.root, record)
        for patch in record.patches:
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
        record = state.load(installed.root, spec.name, framework) if installed else None
        if installed is not None and record is not None and record.complete:
            out += state.provenance(record, installed.root)
    return out


def spec_problems(spec: PocSpec) -> list[str]:
    """What is wrong with ``spec``'s patch files, read without touching any environment:
    a malformed file or folder, or a patch pinned to another version than the spec pins
    (``serving.version`` / ``training.version``). For ``pocforge validate``."""
    try:
        groups = discover(_patches_dir(spec))
    except PatchError as exc:
        return [str(exc)]
    return _pin_problems(spec, groups)


def _patches_dir(spec: PocSpec) -> Path:
    if spec.source_dir is None:
        raise PatchError(f"{spec.name}: the spec was not loaded from a file, so it has no patches/")
    return spec.source_dir / "patches"


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


def _plans(spec: PocSpec, python: str | None, frameworks: tuple[str, ...]) -> list[dry_run.Plan]:
    groups = discover(_patches_dir(spec), frameworks)
    if problems := _pin_problems(spec, groups):
        raise PatchError(problems[0])
    if groups:
        gnu_patch.binary()  # missing GNU patch is bad input, before any environment is probed
    return [
        dry_run.plan(spec.name, framework, patches, locate(framework, python), python)
        for framework, patches in groups.items()
    ]


def _recorded_frameworks(spec: PocSpec, frameworks: tuple[str, ...]) -> list[str]:
    """The frameworks that may hold a record: those named, else the POC's patch folders,
    else every known one (a POC whose patches/ was deleted can still be reverted)."""
    if frameworks:
        return list(frameworks)
    folder = _patches_dir(spec)
    named = sorted(d.name for d in folder.iterdir() if d.is_dir()) if folder.is_dir() else []
    return [f for f in named if f in FRAMEWORKS] or list(FRAMEWORKS)
