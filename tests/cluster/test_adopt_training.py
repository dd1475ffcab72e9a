"""The training stage of a cluster run takes rank 0's folder from the node that wrote the
summary, every node's launcher logs, and every other node's ranks' profiles."""

from __future__ import annotations

import pytest

from pocforge.cluster.workload import adopt_training
from pocforge.results.store import RunStore

pytestmark = pytest.mark.process  # the store reads git for the run's provenance


def test_rank_zeros_folder_every_nodes_logs_and_every_ranks_profile(tmp_path):
    collected = tmp_path / "collected"
    for host, rank in (("h1", 0), ("h2", 1)):
        run_dir = collected / host / "opt" / "pocforge" / "run"
        (run_dir / "logs").mkdir(parents=True)
        (run_dir / "logs" / f"trainer-rank{rank}.log").write_text(f"rank {rank}\n")
        profile = run_dir / "training" / "profile"
        profile.mkdir(parents=True)
        (profile / f"rank{rank}.profiler_out.txt").write_text("table\n")
    (collected / "h1" / "opt/pocforge/run/training/summary.json").write_text("{}\n")
    run = RunStore(tmp_path / "results").create(poc="p", provenance=False)
    with run.stage("training") as stage:
        found = adopt_training(stage, collected)
    assert found == run.path / "training" / "summary.json"
    kept = sorted(
        p.relative_to(run.path / "training").as_posix()
        for p in (run.path / "training").rglob("*")
        if p.is_file()
    )
    assert kept == [
        "logs/h1/trainer-rank0.log",
        "logs/h2/trainer-rank1.log",
        "profile/rank0.profiler_out.txt",
        "profile/rank1.profiler_out.txt",
        "summary.json",
    ]
