"""The collectives stage's expert-parallel records: a node's ``collectives_ep_runs`` fact (the
role's raw DeepEP output, here real outputs from tests/data/ep/) becomes one
``collectives/ep_alltoall-<benchmark>-<host>.json`` per run, and a run that failed or
printed no result becomes a failed cell of the health matrix, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from pocforge.cluster.events import CheckRecord, ClusterResult, EventCollector
from pocforge.cluster.records import write_ep_alltoall, write_health
from pocforge.results.run_reader import RunData
from pocforge.results.store import RunStore
from pocforge.spec import load_poc

# The store's provenance runs git.
pytestmark = pytest.mark.process

EP = Path(__file__).resolve().parents[1] / "data" / "ep"


def _fact(host: str, runs: list[dict]) -> dict:
    """The role's ``set_fact`` of ``collectives_ep_runs`` as ansible-runner reports it."""
    return {
        "event": "runner_on_ok",
        "event_data": {
            "host": host,
            "task": "List the expert-parallel benchmark runs",
            "res": {"ansible_facts": {"collectives_ep_runs": runs}},
        },
    }


def _stdout(name: str) -> str:
    return (EP / name).read_text(encoding="utf-8")


def _collect(runs_by_host: dict[str, list[dict]]) -> ClusterResult:
    collector = EventCollector("collectives.yml")
    for host, runs in runs_by_host.items():
        collector(_fact(host, runs))
    return collector.result


def test_each_nodes_output_is_its_own_result(tmp_path) -> None:
    """The event collector keeps the fact as the host's output; each node's run is parsed
    with the DeepEP importer, named for its benchmark and node, its raw text kept."""
    result = _collect(
        {
            "h1": [
                {"name": "intranode", "script": "tests/test_intranode.py", "rc": 0,
                 "stdout": _stdout("deepep_intranode_h200_p5en_8gpu.txt")},
                {"name": "internode", "script": "tests/test_internode.py", "rc": 0,
                 "stdout": _stdout("deepep_internode_2node_16gpu_roce.txt")},
            ],
            "h2": [
                {"name": "internode", "script": "tests/test_internode.py", "rc": 0,
                 "stdout": _stdout("deepep_internode_h100_2node_4ib.txt")},
            ],
        }
    )  # fmt: skip
    assert result.to_dict()["hosts"]["h1"].get("outputs") is None  # not in the saved record
    run = RunStore(tmp_path / "results").create(load_poc("demo"))
    with run.stage("collectives") as stage:
        written = write_ep_alltoall(stage, result)
    run.finish()
    assert [(r.benchmark, r.host) for r in written] == [
        ("deepep-intranode", "h1"),
        ("deepep-internode", "h1"),
        ("deepep-internode", "h2"),
    ]
    folder = run.path / "collectives"
    assert sorted(p.name for p in folder.glob("*.json")) == [
        "ep_alltoall-deepep-internode-h1.json",
        "ep_alltoall-deepep-internode-h2.json",
        "ep_alltoall-deepep-intranode-h1.json",
    ]
    assert (folder / "raw" / "ep_internode-h2.txt").read_text() == _stdout(
        "deepep_internode_h100_2node_4ib.txt"
    )
    data = RunData.load(run)
    assert data.problems == [] and data.collectives == []
    by = {r.collective: r.verdict_metrics() for r in data.ep_alltoall}
    assert by["ep_alltoall-deepep-internode-h1"]["ep_dispatch.rdma_gbs"] == 83.09
    assert by["ep_alltoall-deepep-internode-h2"]["ep_dispatch.rdma_gbs"] == 4.72
    assert by["ep_alltoall-deepep-intranode-h1"]["ep_combine.nvl_gbs"] == 321.89
    assert not any(h.checks for h in result.hosts.values())  # nothing failed


def test_failed_and_unreadable_runs_are_failed_cells(tmp_path) -> None:
    """A run that exited 1 (the role's own check kept as it was) or timed out (no exit
    status, no check from the role), and one that exited 0 printing no result line: no
    file for any of them, a failed health cell for each, with the importer's one line."""
    role_check = CheckRecord(
        host="h1", check="ep_intranode_run", status="fail", measured=1, threshold=0,
        message="ep_intranode_run: 1 (expected eq 0): AssertionError",
    )  # fmt: skip
    result = _collect(
        {
            "h1": [
                {"name": "intranode", "script": "tests/test_intranode.py", "rc": 1,
                 "stdout": _stdout("deepep_intranode_h200_p5en_8gpu.txt")},
                {"name": "low_latency", "script": "tests/test_low_latency.py", "rc": None,
                 "stdout": ""},
                {"name": "internode", "script": "tests/test_internode.py", "rc": 0,
                 "stdout": "NCCL INFO Bootstrap: Using eth0\n[testing] Running ... passed\n"},
            ]
        }
    )  # fmt: skip
    result.hosts["h1"].checks["ep_intranode_run"] = role_check
    run = RunStore(tmp_path / "results").create(load_poc("demo"))
    with run.stage("collectives") as stage:
        assert write_ep_alltoall(stage, result) == []
    health = write_health(run, result, "collectives")
    run.finish()
    cells = {c.check: c for c in health.checks}
    assert cells["ep_intranode_run"].detail == role_check.message  # the role's, untouched
    timed_out = cells["ep_low_latency_run"]
    assert (timed_out.status, timed_out.value) == ("fail", "no exit status")
    assert timed_out.detail == (
        "ep_low_latency_run: tests/test_low_latency.py ended without an exit status"
    )
    unread = cells["ep_internode_result"]
    assert unread.status == "fail" and unread.detail == (
        "ep_internode_result: collectives/raw/ep_internode-h1.txt: no DeepEP or MoRI "
        "dispatch/combine result lines found (expected '[tuning] ...', '[rank N] Dispatch "
        "... bandwidth', MoRI 'Round N duration(us)' or its 'Dispatch Performance' table)"
    )
    assert not list((run.path / "collectives").glob("*.json"))
    assert (run.path / "collectives" / "raw" / "ep_internode-h1.txt").is_file()
