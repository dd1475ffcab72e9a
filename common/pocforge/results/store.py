"""The run store: ``results/<poc>/<run-id>/`` with a manifest, provenance and stage folders.

The runner's API::

    run = RunStore().create(spec)               # run.json + provenance.json
    with run.stage("serving") as stage:         # running -> complete | failed | interrupted
        stage.write_json("chat/result.json", data)
        stage.append_jsonl("chat/requests.jsonl", rows)
        run_sweep(cfg, stage.dir / "chat")       # files a tool writes itself are adopted
    run.finish()

Every file goes through :mod:`pocforge.atomic` (tmp, fsync, rename) and through
the run's :class:`~pocforge.results.secrets.Redactor`; ``run.json`` is rewritten last,
after the file it describes, so whatever instant a writer dies at, the manifest lists only
complete files and ``verify`` names whatever came after it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from pocforge import atomic
from pocforge.paths import results_root
from pocforge.results.base import SchemaError
from pocforge.results.provenance import collect_local, kit_info, now, patches
from pocforge.results.run_schema import (
    FileEntry,
    ImportSource,
    Provenance,
    RunManifest,
    StageRecord,
    Writer,
)
from pocforge.results.schema import load_document
from pocforge.results.secrets import Redactor

MANIFEST = "run.json"
PROVENANCE = "provenance.json"


class RunError(ValueError):
    """A run reference that does not resolve, or a misuse of the store; one clear line."""


def new_run_id() -> str:
    """Sortable, unique enough: UTC timestamp to the millisecond plus the pid."""
    t = datetime.now(UTC)
    return f"{t:%Y%m%d-%H%M%S}-{t.microsecond // 1000:03d}-{os.getpid() % 100000:05d}"


def default_root() -> Path:
    return results_root()


class RunStore:
    """All runs under ``root`` (default: ``results/`` of the checkout)."""

    def __init__(self, root: str | Path | None = None):
        self.root = Path(root) if root is not None else default_root()

    def create(
        self,
        spec: Any = None,
        *,
        poc: str | None = None,
        run_id: str | None = None,
        provenance: bool = True,
        redactor: Redactor | None = None,
    ) -> Run:
        """Start a run of ``spec`` (a PocSpec) or, for imports, of a bare ``poc`` name."""
        from pocforge.spec import public_dump

        name = spec.name if spec is not None else poc
        if not name:
            raise RunError("a run needs a spec or a POC name")
        run_id = run_id or new_run_id()
        path = self.root / name / run_id
        if path.exists():
            raise RunError(f"run {name}/{run_id} already exists")
        path.mkdir(parents=True)
        redactor = redactor or Redactor.for_spec(spec)
        stamp = now()
        manifest = RunManifest(
            poc=name,
            run_id=run_id,
            status="running",
            created_at=stamp,
            updated_at=stamp,
            spec=public_dump(spec) if spec is not None else None,
            spec_hash=spec.spec_hash if spec is not None else None,
            kit=kit_info(),
            writer=Writer(host=socket.gethostname(), pid=os.getpid()),
            hosts=[h.name for h in spec.cluster.hosts] if spec is not None else [],
        )
        run = Run(path, manifest, redactor)
        run._save_manifest()
        if provenance:
            facts = collect_local(redactor)
            run.write_json(
                PROVENANCE,
                Provenance(
                    collected_at=facts.collected_at,
                    hosts=[facts],
                    patches=patches(spec.source_dir / "patches") if spec is not None else [],
                ),
            )
            if facts.hostname not in run.manifest.hosts:
                run.manifest.hosts.append(facts.hostname)
                run._save_manifest()
        if spec is not None and spec.source_dir is not None:
            # Competitors' result files travel with the run: its dashboard rebuilds from it alone.
            for comp in spec.compare.competitors:
                source = spec.source_dir / comp.file
                if source.is_file():
                    run.add_file(source, f"compare/{Path(comp.file).name}")
        return run

    def runs(self, poc: str) -> list[Path]:
        """Run folders of a POC, oldest first (run ids sort by time)."""
        folder = self.root / poc
        return sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []

    def resolve(self, ref: str | Path) -> Path:
        """``<poc>/<run-id>``, ``<poc>`` (its newest run), or a run folder path."""
        path = Path(ref)
        if path.is_dir() and (path / MANIFEST).exists():
            return path
        candidate = self.root / str(ref)
        if candidate.is_dir() and (candidate / MANIFEST).exists():
            return candidate
        if candidate.is_dir() and "/" not in str(ref).strip("/"):
            runs = self.runs(str(ref))
            if runs:
                return runs[-1]
            raise RunError(f"POC {ref!r} has no runs under {self.root}")
        if path.is_dir():
            return path  # a folder without a manifest (cut off before it): still readable
        raise RunError(f"no run {str(ref)!r} (give <poc>, <poc>/<run-id> or a run folder)")


class Run:
    """One run folder. Create with :meth:`RunStore.create`, read with :meth:`Run.open`."""

    def __init__(self, path: Path, manifest: RunManifest, redactor: Redactor | None = None):
        self.path = Path(path)
        self.manifest = manifest
        self.redactor = redactor or Redactor()
        self._open_files: dict[str, Any] = {}

    # ------------------------------------------------------------------ reading

    @classmethod
    def open(cls, path: str | Path) -> Run:
        """Read a run folder; a missing manifest (run cut off at birth) gives a stub one."""
        path = Path(path)
        if not path.is_dir():
            raise RunError(f"{path} is not a run folder")
        file = path / MANIFEST
        if file.exists():
            try:
                manifest = load_document(file, RunManifest)
            except SchemaError as exc:
                raise RunError(str(exc)) from None
        else:
            stamp = now()
            manifest = RunManifest(
                poc=path.parent.name,
                run_id=path.name,
                status="interrupted",
                created_at=stamp,
                updated_at=stamp,
                spec=None,
                spec_hash=None,
                kit=kit_info(),
                hosts=[],
            )
        return cls(path, manifest)

    @property
    def id(self) -> str:
        return f"{self.manifest.poc}/{self.manifest.run_id}"

    def provenance(self) -> Provenance | None:
        file = self.path / PROVENANCE
        if not file.exists():
            return None
        try:
            return load_document(file, Provenance)
        except SchemaError:
            return None

    def read_json(self, rel: str) -> Any:
        return json.loads((self.path / rel).read_text(encoding="utf-8"))

    # ------------------------------------------------------------------ writing

    def _rel(self, rel: str | Path) -> str:
        rel_path = Path(rel)
        if rel_path.is_absolute() or ".." in rel_path.parts:
            raise RunError(f"{rel}: run files are relative paths inside the run")
        if str(rel_path) == MANIFEST:
            raise RunError(f"{MANIFEST} is written by the store only")
        return rel_path.as_posix()

    def _save_manifest(self) -> None:
        self.manifest.updated_at = now()
        text = self.manifest.model_dump_json(indent=2)
        atomic.write_text(self.path / MANIFEST, self.redactor.text(text))

    def _record(self, rel: str, stage: str | None) -> None:
        digest, size = atomic.sha256_file(self.path / rel)
        self.manifest.files[rel] = FileEntry(sha256=digest, bytes=size)
        if stage and stage in self.manifest.stages and rel not in self.manifest.stages[stage].files:
            self.manifest.stages[stage].files.append(rel)
        self._save_manifest()

    def write_bytes(self, rel: str | Path, data: bytes, *, stage: str | None = None) -> Path:
        rel = self._rel(rel)
        data = self.redactor.data(data)
        entry = self.manifest.files.get(rel)
        if entry is not None and entry.sha256 is not None:
            # Rewriting a recorded file: say so first, so a kill between the rename and the
            # manifest update reads as an interrupted rewrite, not as tampering.
            entry.replacing = hashlib.sha256(data).hexdigest()
            self._save_manifest()
        atomic.write_bytes(self.path / rel, data)
        self._record(rel, stage)
        return self.path / rel

    def write_text(self, rel: str | Path, text: str, *, stage: str | None = None) -> Path:
        return self.write_bytes(rel, text.encode("utf-8"), stage=stage)

    def write_json(self, rel: str | Path, obj: Any, *, stage: str | None = None) -> Path:
        if isinstance(obj, BaseModel):
            text = obj.model_dump_json(indent=2)
        else:
            text = json.dumps(obj, indent=2, default=str)
        return self.write_text(rel, text + "\n", stage=stage)

    def add_file(self, source: str | Path, rel: str | Path, *, stage: str | None = None) -> Path:
        """Copy an outside file into the run (scrubbed of secrets)."""
        return self.write_bytes(rel, Path(source).read_bytes(), stage=stage)

    def append_jsonl(
        self, rel: str | Path, rows: Iterable[Any], *, stage: str | None = None
    ) -> Path:
        """Append whole lines and fsync; the file is checksummed when closed."""
        rel = self._rel(rel)
        path = self.path / rel
        if rel not in self._open_files:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._open_files[rel] = open(path, "ab")  # noqa: SIM115 - kept open across calls
            self.manifest.files[rel] = FileEntry(sha256=None, bytes=0, open=True)
            if stage and stage in self.manifest.stages:
                self.manifest.stages[stage].files.append(rel)
            self._save_manifest()
        lines = []
        for row in rows:
            text = row.model_dump_json() if isinstance(row, BaseModel) else json.dumps(row)
            lines.append(self.redactor.text(text))
        if lines:
            fh = self._open_files[rel]
            fh.write(("\n".join(lines) + "\n").encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())
        return path

    def close_file(self, rel: str | Path) -> None:
        rel = self._rel(rel)
        fh = self._open_files.pop(rel, None)
        if fh is not None:
            fh.close()
            self._record(rel, None)

    def adopt(self, folder: str | Path, *, stage: str | None = None) -> list[str]:
        """Checksum files a tool wrote itself under ``folder``, or that one file (scrubbing
        secrets first)."""
        base = self.path / folder
        adopted = []
        if base.is_file():
            files = [base]
        elif base.is_dir():
            files = sorted(p for p in base.rglob("*") if p.is_file())
        else:
            return adopted
        for file in files:
            rel = file.relative_to(self.path).as_posix()
            if atomic.is_temporary(file) or rel in self._open_files or rel == MANIFEST:
                continue
            entry = self.manifest.files.get(rel)
            if entry is not None and entry.sha256 == atomic.sha256_file(file)[0]:
                continue
            if self.redactor:
                data = file.read_bytes()
                clean = self.redactor.data(data)
                if clean != data:
                    atomic.write_bytes(file, clean)
            self._record(rel, stage)
            adopted.append(rel)
        return adopted

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[Stage]:
        """Mark a stage running; complete on exit, failed on exception, interrupted on ^C."""
        record = StageRecord(status="running", started_at=now())
        self.manifest.stages[name] = record
        self._save_manifest()
        stage = Stage(self, name)
        try:
            yield stage
        except KeyboardInterrupt:
            record.status = "interrupted"
            raise
        except BaseException as exc:
            record.status = "failed"
            record.error = f"{type(exc).__name__}: {self.redactor.text(str(exc))}"[:500]
            raise
        else:
            record.status = "complete"
        finally:
            for rel in [r for r in self._open_files if r.startswith(f"{name}/")]:
                self.close_file(rel)
            self.adopt(name, stage=name)
            record.finished_at = now()
            self._save_manifest()

    def set_imported_from(self, tool: str, file: Path, sha256: str) -> None:
        self.manifest.imported_from = ImportSource(tool=tool, file=Path(file).name, sha256=sha256)
        self._save_manifest()

    def resume(self) -> None:
        """Take the run over in this process (after an interruption): running again."""
        self.manifest.status = "running"  # type: ignore[assignment]
        self.manifest.writer = Writer(host=socket.gethostname(), pid=os.getpid())
        self._save_manifest()

    def retire_stage(self, name: str) -> str | None:
        """Move an unfinished stage's folder to ``<name>.attempt-<n>`` (files, checksums and
        record kept, under the new name) so the stage can run again from scratch; its
        records are appended to, so reusing the folder would mix two attempts."""
        folder = self.path / name
        if name not in self.manifest.stages and not folder.exists():
            return None
        attempt = 1
        while (
            self.path / f"{name}.attempt-{attempt}"
        ).exists() or f"{name}.attempt-{attempt}" in self.manifest.stages:
            attempt += 1
        new = f"{name}.attempt-{attempt}"
        if folder.exists():
            folder.rename(self.path / new)
        prefix = f"{name}/"
        self.manifest.files = {
            (new + rel[len(name) :] if rel.startswith(prefix) else rel): entry
            for rel, entry in self.manifest.files.items()
        }
        record = self.manifest.stages.pop(name, None)
        if record is not None:
            record.files = [
                new + rel[len(name) :] if rel.startswith(prefix) else rel for rel in record.files
            ]
            self.manifest.stages[new] = record
            if record.status == "running":  # its writer was killed outright (SIGKILL, a lost host)
                record.status = "interrupted"  # type: ignore[assignment]
                record.error = "cut off while running: the process writing it was killed"
                # what it wrote before it was cut off becomes part of the run, checksummed
                self.adopt(new, stage=new)
        self._save_manifest()
        return new

    def finish(self, status: str | None = None) -> None:
        """Close open files and set the run's final status (derived from stages by default)."""
        for rel in list(self._open_files):
            self.close_file(rel)
        if status is None:
            statuses = {  # retired attempts (``<stage>.attempt-<n>``) do not decide the outcome
                s.status for name, s in self.manifest.stages.items() if ".attempt-" not in name
            }
            status = next((s for s in ("interrupted", "failed") if s in statuses), "complete")
        self.manifest.status = status  # type: ignore[assignment]
        self.manifest.writer = None
        self._save_manifest()

    def __enter__(self) -> Run:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.finish()
        else:
            self.finish("interrupted" if exc_type is KeyboardInterrupt else "failed")


class Stage:
    """Writes relative to ``<run>/<stage>/``, recorded as the stage's files."""

    def __init__(self, run: Run, name: str):
        self.run = run
        self.name = name
        self.dir = run.path / name
        self.dir.mkdir(parents=True, exist_ok=True)

    def _rel(self, rel: str | Path) -> str:
        return f"{self.name}/{Path(rel).as_posix()}"

    def write_json(self, rel: str | Path, obj: Any) -> Path:
        return self.run.write_json(self._rel(rel), obj, stage=self.name)

    def write_text(self, rel: str | Path, text: str) -> Path:
        return self.run.write_text(self._rel(rel), text, stage=self.name)

    def write_bytes(self, rel: str | Path, data: bytes) -> Path:
        return self.run.write_bytes(self._rel(rel), data, stage=self.name)

    def add_file(self, source: str | Path, rel: str | Path | None = None) -> Path:
        return self.run.add_file(source, self._rel(rel or Path(source).name), stage=self.name)

    def add_tree(self, source: str | Path, rel: str | Path = "") -> list[Path]:
        """Copy a folder's files (e.g. a bench output folder) into the stage."""
        out = []
        for file in sorted(p for p in Path(source).rglob("*") if p.is_file()):
            if atomic.is_temporary(file) or file.name.endswith(".tmp"):
                continue
            out.append(self.add_file(file, Path(rel) / file.relative_to(source)))
        return out

    def append_jsonl(self, rel: str | Path, rows: Iterable[Any]) -> Path:
        return self.run.append_jsonl(self._rel(rel), rows, stage=self.name)
