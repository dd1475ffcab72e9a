"""Writing the patched files over the installed ones, and the originals back, byte for byte.

``commit`` saves every file the patches change to ``backup/`` beside the record
(:mod:`~pocforge.frameworks.patching.state`), writes the record marked incomplete, replaces
each file in one rename (:mod:`pocforge.atomic`, keeping its permission bits), then marks
the record complete; a failure on the way writes the originals back and forgets the record.
``restore`` (a revert, or undoing an apply that failed) writes the saved bytes back rather
than running ``patch -R``, so what comes back is exactly what was there, with its
modification time: a ``.pyc`` compiled from the patched file no longer matches and is
recompiled. Both hold the environment's :mod:`~pocforge.frameworks.patching.lock`.
"""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

from pocforge import atomic
from pocforge.frameworks.patching import lock, state
from pocforge.frameworks.patching.files import PatchError

BACKUP_DIR = "backup"


def commit(
    root: Path, record: state.State, before: dict[str, bytes | None], after: dict[str, bytes | None]
) -> None:
    """Apply ``after`` (path -> bytes, None: delete) to the files under ``root``, all or none.

    ``before`` is what the dry run started from, for every file the patches touch; a file
    that differs from it now (someone else wrote it since) refuses before anything is
    written. ``record.files`` lists the files to change.
    """
    where = state.folder(root, record.poc, record.framework)
    changes = [f.path for f in record.files]
    with lock.held(root):
        for rel, data in before.items():
            if state.contents(root / rel) != data:
                raise PatchError(f"{root / rel} changed while checking; nothing changed, try again")
        if where.exists():
            shutil.rmtree(where)  # backups without a record: an apply that failed
        for rel in changes:
            if before[rel] is not None:
                saved = where / BACKUP_DIR / rel
                saved.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(root / rel, saved)  # copy2: the mtime restore() puts back
                if state.contents(saved) != before[rel]:
                    raise PatchError(f"{saved}: the saved copy differs")
        state.save(where, record)
        try:
            for rel in changes:
                _replace(root / rel, after[rel])
        except BaseException:
            _restore_files(root, where, record)
            state.forget(where)
            raise
        state.save(where, record.model_copy(update={"complete": True}))


def restore(root: Path, record: state.State) -> None:
    """Write back the originals ``record`` saved, then forget the record."""
    where = state.folder(root, record.poc, record.framework)
    with lock.held(root):
        _restore_files(root, where, record)
        state.forget(where)


def _restore_files(root: Path, where: Path, record: state.State) -> None:
    for file in record.files:
        target = root / file.path
        if state.digest(state.contents(target)) == file.before_sha256:
            continue
        if file.before_sha256 is None:
            target.unlink(missing_ok=True)
            continue
        saved = where / BACKUP_DIR / file.path
        data = state.contents(saved)
        if state.digest(data) != file.before_sha256:
            raise PatchError(f"{saved}: the saved original is missing or damaged; cannot restore")
        assert data is not None
        info = saved.stat()
        atomic.write_bytes(
            target,
            data,
            mode=stat.S_IMODE(info.st_mode),
            times_ns=(info.st_atime_ns, info.st_mtime_ns),
        )
        if state.digest(state.contents(target)) != file.before_sha256:
            raise PatchError(f"{target}: restored but its sha256 differs from the original")


def _replace(path: Path, data: bytes | None) -> None:
    """Write a patched file in one rename, keeping the installed file's mode; None: delete."""
    if data is None:
        path.unlink(missing_ok=True)
        return
    mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else None
    atomic.write_bytes(path, data, mode=mode)
