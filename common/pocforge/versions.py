"""Version facts, one function each: the kit's git state and an installed distribution's version."""

from __future__ import annotations

import importlib.metadata
import subprocess
from dataclasses import dataclass
from pathlib import Path

from pocforge.paths import local_kit


@dataclass(frozen=True)
class GitState:
    sha: str | None  # None outside a git checkout (an installed kit)
    dirty: bool | None  # tracked files changed (untracked ones are not counted)


def _git(root: Path, *args: str, timeout: float) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(root), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def git_state(root: Path | None = None) -> GitState:
    """The git sha and dirty flag of the kit's checkout (``root`` overrides, for tests)."""
    root = root or local_kit()
    sha = _git(root, "rev-parse", "HEAD", timeout=5)
    if not sha:
        return GitState(None, None)
    dirty = _git(root, "status", "--porcelain", "-uno", timeout=10)
    return GitState(sha.strip(), None if dirty is None else bool(dirty.strip()))


def package_version(dist: str) -> str | None:
    """The installed version of distribution ``dist``; None when it is not installed."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None
