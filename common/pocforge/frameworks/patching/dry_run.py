"""What one framework's patches would do to its installed files, worked out in a scratch copy.

The files the patches touch are copied to a temporary folder and GNU patch
(:mod:`~pocforge.frameworks.patching.gnu_patch`) replays every patch there in order, so a
patch that depends on an earlier one is checked against the earlier one's result, and the
installed files are only read. A patch pinned to another version than the installed
distribution's (compared as strings) is not replayed at all. When an earlier apply left a
record, the record is checked against the files and the patches instead.
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from pocforge.frameworks.patching import gnu_patch, state
from pocforge.frameworks.patching.files import PatchFile
from pocforge.frameworks.patching.report import PatchStatus
from pocforge.frameworks.patching.target import Installed


@dataclass
class Plan:
    """One framework's patches against its installed files."""

    framework: str
    installed: Installed | None
    patches: list[PatchFile]
    statuses: list[PatchStatus]
    recorded: state.State | None = None  # an earlier apply's record
    before: dict[str, bytes | None] = field(default_factory=dict)  # None: absent
    after: dict[str, bytes | None] = field(default_factory=dict)

    @property
    def changes(self) -> list[str]:
        return [p for p in self.before if self.before[p] != self.after[p]]

    def new_record(self, poc: str) -> state.State:
        """The record of applying this plan, marked incomplete until the files are written."""
        assert self.installed is not None
        return state.State(
            poc=poc,
            framework=self.framework,
            distribution=self.installed.distribution,
            version=self.installed.version,
            python=self.installed.python,
            applied_at=datetime.now(UTC).isoformat(timespec="seconds"),
            complete=False,
            patches=[
                state.RecordedPatch(
                    name=p.name,
                    sha256=p.sha256,
                    description=p.description,
                    files=p.files,
                    preexisting=s.status == "applied",
                )
                for p, s in zip(self.patches, self.statuses, strict=True)
            ],
            files=[
                state.FileRecord(
                    path=r,
                    before_sha256=state.digest(self.before[r]),
                    after_sha256=state.digest(self.after[r]),
                )
                for r in self.changes
            ],
        )


def plan(
    poc: str,
    framework: str,
    patches: list[PatchFile],
    installed: Installed | None,
    python: str | None,
) -> Plan:
    """Statuses per patch and the files' bytes before and after; changes nothing installed."""
    if installed is None:
        detail = f"no {framework} for {python or sys.executable}; point --python at its environment"
        statuses = [PatchStatus(p.name, "not-installed", detail) for p in patches]
        return Plan(framework, None, patches, statuses)
    root = installed.root
    paths = list(dict.fromkeys(f for p in patches for f in p.files))
    before = {f: state.contents(root / f) for f in paths}
    recorded = state.load(root, poc, framework)
    if recorded is not None:
        statuses = _recorded(recorded, installed, patches)
        return Plan(framework, installed, patches, statuses, recorded, before, dict(before))

    statuses = []
    with tempfile.TemporaryDirectory(prefix="pocforge-patch-") as tmp:
        scratch = Path(tmp)
        for rel, data in before.items():
            if data is not None:
                (scratch / rel).parent.mkdir(parents=True, exist_ok=True)
                (scratch / rel).write_bytes(data)
        for patch in patches:
            statuses.append(_replay(patch, installed, scratch))
        after = {f: state.contents(scratch / f) for f in paths}
    return Plan(framework, installed, patches, statuses, None, before, after)


def _replay(patch: PatchFile, installed: Installed, scratch: Path) -> PatchStatus:
    """Apply ``patch`` to the scratch copy if it applies; say what happened."""
    if patch.version != installed.version:
        return PatchStatus(
            patch.name,
            "version-mismatch",
            f"the patch is for {patch.framework} {patch.version}, "
            f"{installed.describe()} is installed in {installed.root}",
        )
    ok, output = gnu_patch.run(patch, scratch, dry_run=True)
    if ok:
        ok, output = gnu_patch.run(patch, scratch)
        if ok:
            return PatchStatus(patch.name, "applies", installed.describe())
    elif gnu_patch.run(patch, scratch, reverse=True, dry_run=True)[0]:
        return PatchStatus(
            patch.name,
            "applied",
            "found in the installed files without a pocforge record; revert cannot undo it",
        )
    return PatchStatus(
        patch.name, "conflict", f"{installed.describe()}: {gnu_patch.failure(output)}"
    )


def _recorded(
    record: state.State, installed: Installed, patches: list[PatchFile]
) -> list[PatchStatus]:
    """Statuses when an earlier apply left a record: applied, or stale and why."""
    detail = ""
    where = state.folder(installed.root, record.poc, record.framework)
    if not record.complete:
        detail = "an earlier apply was interrupted; `pocforge patch revert` restores the originals"
    elif installed.version != record.version:
        detail = (
            f"applied to {record.distribution} {record.version}, {installed.describe()} is "
            f"installed now; revert --force or delete {where}"
        )
    elif [(p.name, p.sha256) for p in record.patches] != [(p.name, p.sha256) for p in patches]:
        detail = "the patch files changed since they were applied; revert first, then apply"
    elif changed := [r.path for r in record.files if state.changed_since(installed.root, r, False)]:
        detail = f"{changed[0]} changed since the apply of {record.applied_at}; revert --force"
    if detail:
        return [PatchStatus(p.name, "stale", detail) for p in patches]
    return [PatchStatus(p.name, "applied", f"recorded {record.applied_at}") for p in patches]
