"""Expert-parallel all-to-all criteria (``collectives.ep_<phase>.<metric>``) on runs holding
real DeepEP / MoRI outputs (tests/data/ep/, sources in tests/data/README.md): the run reader
loads them beside nccl-tests' tables, the judge decides them from each output's verdict
metrics with the worst output deciding, and a benchmark that did not run, or printed no
such number, is inconclusive and says why."""

from __future__ import annotations

import pytest

from pocforge.results.run_reader import RunData
from pocforge.results.verdicts import judge_run
from pocforge.spec import load_poc
from pocforge.spec.acceptance_schema import AcceptanceSpec
from tests.results.conftest import build_demo_run
from tests.results.test_verdicts import INTERNODE, INTRANODE, ep_alltoall

# The store's provenance runs git.
pytestmark = pytest.mark.process


def _criteria(*texts: str):
    return AcceptanceSpec.model_validate({"criteria": list(texts)}).criteria


def _run(store, *outputs: tuple[str, str | None]):
    run = store.create(load_poc("demo"))
    for name, host in outputs:
        ep_alltoall(run, name, host)
    run.finish()
    return run


def test_the_reader_keeps_ep_results_apart_from_nccl_tables(store) -> None:
    """collectives/ep_alltoall-*.json read as EpAllToAllResult, the rccl-tests table beside
    it as CollectiveResult; neither is a problem."""
    run = build_demo_run(store)
    ep_alltoall(run, INTERNODE, "h1")
    data = RunData.load(run)
    assert [r.collective for r in data.collectives] == ["all_reduce"]
    assert [r.collective for r in data.ep_alltoall] == ["ep_alltoall-deepep-internode-h1"]
    assert data.ep_alltoall[0].verdict_metrics()["ep_dispatch.rdma_gbs"] == 83.09
    assert data.problems == []


def test_a_damaged_ep_file_is_one_problem_line(store) -> None:
    run = _run(store, (INTRANODE, None))
    (run.path / "collectives" / "ep_alltoall-deepep-internode.json").write_text("{")
    data = RunData.load(run)
    assert [r.benchmark for r in data.ep_alltoall] == ["deepep-intranode"]
    (problem,) = data.problems
    assert "ep_alltoall-deepep-internode.json: not valid JSON" in problem


def test_internode_criteria_pass_and_fail_on_the_real_numbers(store) -> None:
    """2x8 GPUs over RoCE: BF16 dispatch 83.09 GB/s RDMA (its Best line), FP8 80.01, the
    combine's kernel time 1813 us; point verdicts on both sides of each."""
    run = _run(store, (INTERNODE, "h1"))
    verdicts = judge_run(
        run,
        _criteria(
            "collectives.ep_dispatch.rdma_gbs >= 80",
            "collectives.ep_dispatch.rdma_gbs >= 90",
            "collectives.ep_dispatch_fp8.rdma_gbs >= 80",
            "collectives.ep_combine.latency_us <= 2000",
            "collectives.ep_combine.latency_us <= 1500",
        ),
    )
    assert [v.verdict for v in verdicts] == ["pass", "fail", "pass", "pass", "fail"]
    assert [v.estimate for v in verdicts] == [83.09, 83.09, 80.01, 1813.0, 1813.0]
    first = verdicts[0]
    assert (first.method, first.n, first.margin) == ("point", 1, pytest.approx(3.09))
    assert "deepep-internode on h1 83.09" in first.note


def test_the_worst_output_decides(store) -> None:
    """Two nodes' outputs (the RoCE run's 83.09 GB/s and the misconfigured 4-NIC H100 run's
    4.72): the slower one decides, and the note names each."""
    run = _run(store, (INTERNODE, "h1"), ("deepep_internode_h100_2node_4ib.txt", "h2"))
    (verdict,) = judge_run(run, _criteria("collectives.ep_dispatch.rdma_gbs >= 40"))
    assert (verdict.verdict, verdict.estimate, verdict.n) == ("fail", 4.72, 2)
    assert verdict.note == (
        "worst of 2 DeepEP / MoRI outputs (deepep-internode on h1 83.09, "
        "deepep-internode on h2 4.72)"
    )


def test_without_an_ep_result_the_criterion_is_inconclusive(demo_run) -> None:
    """The demo run holds an rccl-tests table and no DeepEP output: the benchmark did not
    run, which is neither a pass nor a fail."""
    (verdict,) = judge_run(demo_run, _criteria("collectives.ep_dispatch.rdma_gbs >= 40"))
    assert verdict.verdict == "inconclusive" and verdict.estimate is None
    assert "no expert-parallel all-to-all result in the run" in verdict.note


def test_a_number_no_output_prints_is_inconclusive(store) -> None:
    """An intranode run prints NVL only: an RDMA criterion cannot be decided from it."""
    run = _run(store, (INTRANODE, "h1"))
    (verdict,) = judge_run(run, _criteria("collectives.ep_dispatch.rdma_gbs >= 40"))
    assert verdict.verdict == "inconclusive"
    assert "no DeepEP / MoRI output of the run reports ep_dispatch.rdma_gbs" in verdict.note
    assert "ep_dispatch.nvl_gbs" in verdict.note


def test_metrics_of_the_other_family_are_refused(store) -> None:
    """A hand-written criterion crossing the families (validate refuses it) is left
    undecided, never read as another number (busbw, #wrong)."""
    run = build_demo_run(store)
    ep_alltoall(run, INTERNODE, "h1")
    nccl, ep = judge_run(
        run,
        _criteria("collectives.all_reduce.rdma_gbs >= 1", "collectives.ep_dispatch.wrong <= 0"),
    )
    assert nccl.verdict == "inconclusive" and "busbw_gbs, pct_reference, wrong)" in nccl.note
    assert ep.verdict == "inconclusive" and "not a judgeable collectives metric" in ep.note
