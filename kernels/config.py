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
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from .arch import current_arch

KERNELS_ROOT = Path(__file__).resolve().parent
DEFAULT_ARCH = "default"


@cache
def load_table(op: str, arch: str) -> dict:
    """The parsed config file of ``op`` for ``arch``, falling back to ``default.json``."""
    folder = KERNELS_ROOT / op / "configs"
    path = folder / f"{arch}.json"
    if not path.exists():
        path = folder / f"{DEFAULT_ARCH}.json"
    table = json.loads(path.read_text())
    if not table.get("configs"):
        raise ValueError(f"{path}: no 'configs' entries")
    return table


def launch_config(op: str, size: int, device=None, arch: str | None = None) -> dict:
    """Launch parameters for ``op`` at problem size ``size`` on ``device`` (or ``arch``).

    Returns a fresh dict so callers may adjust it without touching the cache.
    """
    table = load_table(op, arch or current_arch(device))
    buckets = sorted(table["configs"], key=int)
    chosen = next((b for b in buckets if size <= int(b)), buckets[-1])
    return dict(table["configs"][chosen])
