"""Fixtures for spec tests: a known-good spec as data, and a writer that puts a spec on disk
in a folder named after its POC (the loader checks that the two agree)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from pocforge.spec import PocSpec, load_spec

GOOD: dict[str, Any] = {
    "poc": {"name": "good", "customer": "ACME", "owner": "me@example.com"},
    "model": {
        "id": "org/dense-8b",
        "facts": {"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "experts": 0},
    },
    "cluster": {"gpu": "MI300X", "nodes": 1, "gpus_per_node": 8},
    "serving": {
        "framework": "vllm",
        "parallelism": {"tp": 8},
        "workloads": [
            {
                "name": "chat",
                "dataset": {"kind": "random", "isl": 1024, "osl": 128},
                "load": {"concurrency": [1, 8]},
                "num_prompts": 100,
                "slos": [{"metric": "ttft_ms", "percentile": 99, "max_ms": 2000}],
            }
        ],
    },
    "acceptance": {"criteria": ["serving.chat.ttft_ms.p99 <= 2000"]},
}

MOE_FACTS = {
    "layers": 61,
    "hidden": 7168,
    "heads": 128,
    "kv_heads": 128,
    "experts": 256,
    "top_k": 8,
}


@pytest.fixture
def good() -> dict[str, Any]:
    return copy.deepcopy(GOOD)


@pytest.fixture
def write(tmp_path: Path) -> Callable[..., Path]:
    """Write data (a dict or raw YAML text) as ``<tmp>/<poc name>/poc.yaml``; return the path."""

    def _write(data: dict[str, Any] | str, folder: str | None = None) -> Path:
        if folder is None:
            poc = data.get("poc") if isinstance(data, dict) else None
            folder = poc["name"] if isinstance(poc, dict) and "name" in poc else "good"
        path = tmp_path / folder / "poc.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
        return path

    return _write


@pytest.fixture
def load(write: Callable[..., Path]) -> Callable[..., PocSpec]:
    def _load(data: dict[str, Any] | str, folder: str | None = None) -> PocSpec:
        return load_spec(write(data, folder))

    return _load
