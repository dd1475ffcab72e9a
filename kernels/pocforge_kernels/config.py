"""Launch configs as data: ``kernels/<op>/configs/<arch>.json``.

Each file maps problem-size buckets to launch parameters, the way vLLM's
``fused_moe/configs`` and aiter's tuned CSVs do::

    {
      "op": "rms_norm",
      "size_key": "hidden_size",          # what the bucket keys measure
      "provenance": "where the numbers come from",
      "configs": {"1024": {...}, "8192": {...}}
    }

The chosen bucket is the smallest key at or above the problem size (the largest
key when the problem is bigger than all of them).  ``default.json`` serves any
architecture without a file of its own, the CPU interpreter included.

``POCFORGE_KERNELS_CONFIG_DIR`` names a folder laid out the same way
(``<dir>/<op>/<arch>.json``) whose files win over the shipped ones: a tuning
session on a customer's machine tries configs there without editing the kit,
as vLLM's ``VLLM_TUNED_CONFIG_FOLDER`` does for its MoE configs.  Read when a
table is first loaded in a process.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path

from .arch import current_arch

KERNELS_ROOT = Path(__file__).resolve().parent
DEFAULT_ARCH = "default"
CONFIG_DIR_ENV = "POCFORGE_KERNELS_CONFIG_DIR"


def config_path(op: str, arch: str) -> Path:
    """The file ``op``'s configs for ``arch`` come from: an override, the arch's, or the default."""
    override = os.environ.get(CONFIG_DIR_ENV)
    if override:
        candidate = Path(override) / op / f"{arch}.json"
        if candidate.exists():
            return candidate
    folder = KERNELS_ROOT / op / "configs"
    path = folder / f"{arch}.json"
    return path if path.exists() else folder / f"{DEFAULT_ARCH}.json"


@cache
def load_table(op: str, arch: str) -> dict:
    """The parsed config file of ``op`` for ``arch`` (see :func:`config_path`)."""
    path = config_path(op, arch)
    try:
        table = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from None
    if not table.get("configs"):
        raise ValueError(f"{path}: no 'configs' entries")
    bad = [key for key in table["configs"] if not str(key).isdigit()]
    if bad:
        raise ValueError(
            f"{path}: bucket keys must be whole numbers ({table.get('size_key')}), got {bad}"
        )
    return table


def choose_bucket(table: dict, size: int) -> str:
    """The smallest bucket key at or above ``size``, else the largest."""
    buckets = sorted(table["configs"], key=int)
    return next((b for b in buckets if size <= int(b)), buckets[-1])


def launch_config(op: str, size: int, device=None, arch: str | None = None) -> dict:
    """Launch parameters for ``op`` at problem size ``size`` on ``device`` (or ``arch``).

    Returns a fresh dict so callers may adjust it without touching the cache.
    """
    table = load_table(op, arch or current_arch(device))
    return dict(table["configs"][choose_bucket(table, size)])
