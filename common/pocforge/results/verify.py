"""Check a run folder against its manifest: missing, altered and extra files.

Also names what a run cut off mid-write leaves: a stage or run still marked running
whose writer is gone, files still open for appending, temporary files of an interrupted
atomic write, and a missing manifest. Those are *incomplete*, not corrupt: the folder
still reads, and the dashboard lists them as caveats.
"""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path

from pydantic import BaseModel, Field

from pocforge import atomic
from pocforge.results.store import MANIFEST, Run

# Rebuilt from the run at any time (``pocforge report``, in any language: dashboard.html,
# dashboard.zh-CN.html, their PDFs), so not part of the manifest.
DERIVED = re.compile(r"dashboard(\.[A-Za-z]{2}(-[A-Za-z0-9]+)?)?\.(html|pdf)")


class Altered(BaseModel):
    path: str
    expected: str
    actual: str


class VerifyReport(BaseModel):
    run: str
    status: str
    files: int = Field(description="Files the manifest lists.")
    missing: list[str] = Field(default_factory=list)
    altered: list[Altered] = Field(default_factory=list)
    extra: list[str] = Field(default_factory=list)
    incomplete: list[str] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.altered or self.extra)

    def lines(self) -> list[str]:
        out = [f"missing   {p}" for p in self.missing]
        out += [
            f"altered   {a.path} (sha256 {a.actual[:12]}…, manifest {a.expected[:12]}…)"
            for a in self.altered
        ]
        out += [f"extra     {p}" for p in self.extra]
        out += [f"incomplete {p}" for p in self.incomplete]
        return out


def _writer_alive(run: Run) -> bool:
    w = run.manifest.writer
    if w is None or w.host != socket.gethostname():
        return w is not None  # another host's writer: assume alive, cannot tell
    try:
        os.kill(w.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def verify(path: str | Path) -> VerifyReport:
    """Compare every file under the run folder with the manifest's checksums."""
    path = Path(path)
    has_manifest = (path / MANIFEST).exists()
    run = Run.open(path)
    m = run.manifest
    report = VerifyReport(run=run.id, status=m.status, files=len(m.files))
    if not has_manifest:
        report.incomplete.append(f"{MANIFEST} was never written (run cut off at its start)")
    alive = _writer_alive(run)
    if m.status == "running" and not alive:
        report.incomplete.append("run is marked running but its writer is gone (interrupted)")
    cut_off = [name for name, stage in m.stages.items() if stage.status == "running" and not alive]
    for name in cut_off:
        report.incomplete.append(f"stage {name} was cut off while running")

    for rel, entry in sorted(m.files.items()):
        file = path / rel
        if not file.is_file():
            report.missing.append(rel)
            continue
        if entry.open:
            report.incomplete.append(
                f"{rel} was still open for appending ({file.stat().st_size} bytes)"
            )
            continue
        digest, _ = atomic.sha256_file(file)
        if entry.replacing is not None and digest == entry.replacing:
            report.incomplete.append(
                f"{rel} was being rewritten when the writer stopped (new content complete)"
            )
            continue
        if digest != entry.sha256:
            report.altered.append(Altered(path=rel, expected=entry.sha256 or "", actual=digest))

    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        rel = file.relative_to(path).as_posix()
        if rel == MANIFEST or rel in m.files or DERIVED.fullmatch(rel):
            continue
        if atomic.is_temporary(file):
            report.incomplete.append(f"{rel} is a temporary file of an interrupted write")
        elif any(rel.startswith(f"{name}/") for name in cut_off):
            # a stage records its files when it ends: these were written before the cut
            report.incomplete.append(f"{rel} was written by the cut-off stage (not checksummed)")
        else:
            report.extra.append(rel)
    return report
