"""One apply or revert at a time per environment: ``flock`` on ``<root>/.pocforge-patches/.lock``.

Two appliers on one site-packages would otherwise race: the second could save as the
"original" a file the first has just patched, and its revert would then keep the patch.
``flock`` is held by the kernel and dropped when the process dies, so a crash never leaves
the environment locked. The dry run takes no lock; :mod:`~pocforge.frameworks.patching.backup`
re-reads the files under it and refuses when they changed since the check.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path

from pocforge.frameworks.patching.state import STATE_DIR

LOCK_FILE = ".lock"


@contextlib.contextmanager
def held(root: Path) -> Iterator[None]:
    """Hold the lock of the environment whose packages live in ``root``."""
    (root / STATE_DIR).mkdir(exist_ok=True)
    with open(root / STATE_DIR / LOCK_FILE, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
