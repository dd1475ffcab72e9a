from __future__ import annotations

from pathlib import Path

import pytest
import yaml


@pytest.fixture
def good_spec_file(tmp_path: Path):
    """A two-node 8-GPU vLLM spec with the given parallel sizes, written to disk."""

    def _make(tp: int, dp: int, **serving) -> Path:
        spec = {
            "poc": {"name": "multi", "customer": "c", "owner": "o"},
            "model": {"id": "org/m", "facts": {"experts": 0}},
            "cluster": {
                "gpu": "H200",
                "nodes": 2,
                "gpus_per_node": 8,
                "hosts": [
                    {"name": "a", "address": "198.51.100.31"},
                    {"name": "b", "address": "198.51.100.32"},
                ],
            },
            "serving": {
                "framework": "vllm",
                "parallelism": {"tp": tp, "dp": dp},
                "workloads": [
                    {
                        "name": "w",
                        "dataset": {"kind": "random", "isl": 8, "osl": 8},
                        "load": {"concurrency": [1]},
                        "num_prompts": 1,
                    }
                ],
                **serving,
            },
        }
        path = tmp_path / "multi" / "poc.yaml"
        path.parent.mkdir(exist_ok=True)
        path.write_text(yaml.safe_dump(spec))
        return path

    return _make
