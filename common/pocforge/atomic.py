"""Crash-safe file writes: temporary file in the same folder, fsync, rename, fsync folder.

A reader sees either the old file or the new one, never half of it, whatever instant the
writer dies at; at worst a ``.*.tmp-*`` file is left behind, which ``verify`` reports.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path

TMP_MARK = ".tmp-"


def is_temporary(path: Path) -> bool:
    return path.name.startswith(".") and TMP_MARK in path.name


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_bytes(
    path: Path,
    data: bytes,
    *,
    mode: int | None = None,
    times_ns: tuple[int, int] | None = None,
) -> None:
    """Replace ``path`` with ``data`` in one rename.

    ``mode`` (permission bits) and ``times_ns`` ((atime, mtime) as ``os.utime`` takes them)
    are set on the temporary file, so the file appears with them at the rename: a patched
    script stays executable, and a restored source gets back the mtime its ``.pyc`` knew.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}{TMP_MARK}{os.getpid()}")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            if mode is not None:
                os.fchmod(fh.fileno(), mode)
            if times_ns is not None:
                os.utime(fh.fileno(), ns=times_ns)  # after the last write, which would bump it
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_dir(path.parent)


def write_text(path: Path, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def sha256_file(path: Path, chunk: int = 1 << 20) -> tuple[str, int]:
    """(hex digest, size) of a file, read in chunks."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
            size += len(block)
    return digest.hexdigest(), size
