"""Acceptance criteria judged on a real run with the serving bench's statistics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pocforge.metrics import EP_ALLTOALL_METRICS, METRICS, Metric, judgeable
from pocforge.results.verdicts import judge_run, overall
from pocforge.spec import load_poc
from pocforge.spec.acceptance_schema import AcceptanceSpec
from pocforge.stats import decide, margin

# Starts a subprocess (git for provenance, patch, the CLI) or opens a local socket.
pytestmark = pytest.mark.process


@pytest.mark.parametrize(
    ("op", "lo", "hi", "expected"),
    [
        ("<=", 1, 4, "pass"),
        ("<=", 4, 6, "inconclusive"),
        ("<=", 6, 9, "fail"),
        ("<", 1, 5, "inconclusive"),
        (">=", 5, 9, "pass"),
        (">", 1, 5, "fail"),
        (">=", 1, 4, "fail"),
    ],
)
def test_decide_against_threshold_5(op, lo, hi, expected) -> None:
    assert decide(op, 5.0, lo, hi) == expected


def test_margin_is_headroom() -> None:
    assert margin("<=", 2000, 1500) == (500, 25.0)
    assert margin(">=", 250, 300) == (50, 20.0)


def _criteria(*texts: str):
    return AcceptanceSpec.model_validate({"criteria": list(texts)}).criteria


def test_demo_criteria_on_a_real_run(demo_run) -> None:
    """The demo spec's own criteria: serving ones pass at the operating point; training has no data."""
    verdicts = judge_run(demo_run)
    by = {v.metric: v for v in verdicts}
    ttft = by["serving.chat.ttft_ms.p90"]
    assert ttft.verdict == "pass" and ttft.method == "hierarchical-bootstrap" and ttft.n == 120
    assert ttft.ci_low <= ttft.estimate <= ttft.ci_high and ttft.point == "c8"
    assert ttft.margin == pytest.approx(5000 - ttft.estimate)
    assert len(ttft.per_point) == 4
    assert by["serving.chat.error_rate"].verdict == "pass"
    assert by["training.final_loss"].verdict == "inconclusive"
    assert overall(verdicts) == "inconclusive"


def test_operating_point_and_failures(demo_run) -> None:
    """An impossible latency target fails everywhere; p99 with 120 requests has an interval."""
    verdicts = judge_run(
        demo_run,
        _criteria("serving.chat.ttft_ms.p99 <= 0.001", "serving.chat.output_throughput >= 1"),
    )
    assert verdicts[0].verdict == "fail" and verdicts[1].verdict == "pass"
    assert "no sweep point met every criterion" in verdicts[0].note
    assert overall(verdicts) == "fail"
    missing = judge_run(demo_run, _criteria("serving.nope.ttft_ms.p99 <= 5"))[0]
    assert missing.verdict == "inconclusive" and "no serving result" in missing.note


# every judgeable metric is decided ------------------------------------------------------

COLLECTIVES = Path(__file__).resolve().parents[1] / "data" / "collectives"
MI300X_INTRA = "rccl_all_reduce_mi300x_1node_8gpu.txt"  # real 8x MI300X run, tests/data/README.md


def collectives_stage(run, references) -> list:
    """The cluster stage's own writer on the role's output of a real rccl-tests run."""
    from pocforge.cluster.events import ClusterResult, HostResult
    from pocforge.cluster.records import write_collectives

    text = (COLLECTIVES / MI300X_INTRA).read_text()
    host = HostResult(host="h1", status="ok")
    host.outputs["collectives_runs"] = [
        {"op": "all_reduce", "scope": "intra_node", "rc": 0, "stdout": text}
    ]
    with run.stage("collectives") as stage:
        return write_collectives(
            stage, ClusterResult("collectives.yml", hosts={"h1": host}), references
        )


@pytest.fixture
def full_run(store, tmp_path):
    """A run holding every stage a criterion can name: the demo's real sweep (with the
    energy figures of known telemetry, tests/telemetry/sweeps.py), a training and a timed
    kernel result, and collectives written with MI300X's busbw references."""
    from pocforge.cluster.references import collective_references
    from pocforge.results.stage_schema import KernelResults, KernelRow, TrainingResult, TrainingStep
    from tests.telemetry.sweeps import with_telemetry

    from .conftest import DATA

    run = store.create(load_poc("demo"))
    sweep = with_telemetry(DATA / "pocforge-sweep-a", tmp_path / "sweep", price=1.0)
    with run.stage("serving") as stage:
        stage.add_tree(sweep, "chat")
        # the real sweep through the kit's P/D router: the metrics from servers' counters
        stage.add_tree(DATA / "pocforge-sweep-pd", "pd")
        stage.add_tree(DATA / "pocforge-sweep-pd-nixl", "nixl")  # NIXL's bytes per transfer
        # a real multi-turn sweep: the TTFT of turn 0 and of the later turns
        stage.add_tree(DATA / "pocforge-sweep-multiturn", "mt")
    steps = [TrainingStep(step=i, loss=8.0 - 0.5 * i + 0.01 * (i % 2)) for i in range(8)]
    training = TrainingResult(
        framework="deepspeed",
        world_size=8,
        gpu="MI300X",
        dtype="bfloat16",
        steps=steps,
        tokens_per_s_per_gpu=5000.0,
        tflops_per_gpu=400.0,
        mfu=0.31,
        peak_memory_gb=120.0,
        final_loss=4.6,
    )
    kernels = KernelResults(
        gpu="MI300X",
        timed=True,
        rows=[
            KernelRow(
                op="rms_norm",
                shape={"tokens": 4096, "hidden": 8192},
                dtype="bfloat16",
                pct_roofline=71.0,
                speedup_vs_reference=2.5,
                max_rel_error=0.004,
            )
        ],
    )
    with run.stage("training") as stage:
        stage.write_json("result.json", training)
    with run.stage("parity") as stage:
        stage.write_json("result.json", json.loads(_parity().model_dump_json()))
    with run.stage("kernels") as stage:
        stage.write_json("results.json", kernels)
    collectives_stage(run, collective_references("MI300X", "roce-400g"))
    # real DeepEP / MoRI outputs between them print every expert-parallel metric
    for name in (INTRANODE, MORI_INTERNODE, LOW_LATENCY):
        ep_alltoall(run, name)
    run.finish()
    return run


EP = Path(__file__).resolve().parents[1] / "data" / "ep"  # real outputs, tests/data/README.md
INTRANODE = "deepep_intranode_h200_p5en_8gpu.txt"  # nvl_gbs
INTERNODE = "deepep_internode_2node_16gpu_roce.txt"  # rdma_gbs, nvl_gbs
MORI_INTERNODE = "mori_internode_mi355x_2node.txt"  # rdma_gbs, xgmi_gbs, ll_gbs
LOW_LATENCY = "deepep_low_latency_2node_node1_8gpu.txt"  # total_gbs


def ep_alltoall(run, name: str, host: str | None = None):
    """A real DeepEP / MoRI output through the importer, stored as the collectives stage
    stores it (``collectives/<result.collective>.json``)."""
    from pocforge.results.importers.deepep import parse_text

    result = parse_text((EP / name).read_text(encoding="utf-8"), name)
    result = result.model_copy(update={"host": host})
    run.write_json(f"collectives/{result.collective}.json", result, stage="collectives")
    return result


def _parity(**changes):
    from pocforge.quality.parity import ParityResult

    values = dict(
        baseline="vllm", candidate="vllm + kit", prompts=8, max_tokens=16, top_logprobs=5,
        token_agreement=1.0, first_divergence=None, max_logprob_diff=1e-5,
        mean_logprob_diff=2e-6, kl=1e-9, max_kl=3e-9, per_prompt=[],
    )  # fmt: skip
    return ParityResult(**{**values, **changes})


def _accuracy(run, name="arith", value=0.62, stderr=0.05, error=None):
    from pocforge.quality.accuracy import AccuracyResult, MetricScore

    folder = run.path / "serving" / "_accuracy" / name
    folder.mkdir(parents=True, exist_ok=True)
    if error:
        (folder / "error.json").write_text(json.dumps({"task": name, "error": error}))
        return
    score = MetricScore(value=value, stderr=stderr, filter="first_number")
    result = AccuracyResult(
        name=name, task="pocforge_arith", api="completions", num_fewshot=0, limit=None,
        samples=100, metrics={"exact_match": score}, lm_eval_version="0.4.13", seconds=9.0,
    )  # fmt: skip
    (folder / "result.json").write_text(result.model_dump_json())


def test_accuracy_is_judged_with_lm_evals_stderr(full_run) -> None:
    """0.62 ± 1.96·0.05 = [0.522, 0.718]: above 0.5 passes, against 0.6 inconclusive, below
    0.8 passes for <=; an infrastructure failure is inconclusive and says so."""
    _accuracy(full_run)
    _accuracy(full_run, "gsm", error="lm-eval failed (exit 1): ConnectionError")
    above, close, missing, infra = judge_run(
        full_run,
        _criteria(
            "accuracy.arith.exact_match >= 0.5",
            "accuracy.arith.exact_match >= 0.6",
            "accuracy.arith.acc >= 0.5",
            "accuracy.gsm.exact_match >= 0.5",
        ),
    )
    assert above.verdict == "pass" and above.method == "lm-eval stderr"
    assert above.ci_low == pytest.approx(0.62 - 1.96 * 0.05, abs=1e-3)
    assert close.verdict == "inconclusive"
    assert (
        missing.verdict == "inconclusive"
        and "reports no acc (it reports: exact_match)" in missing.note
    )
    assert infra.verdict == "inconclusive" and "infrastructure, not quality" in infra.note


def test_parity_divergence_fails_its_criterion(store) -> None:
    run = store.create(load_poc("demo"))
    with run.stage("parity") as stage:
        broken = _parity(token_agreement=0.25, first_divergence=2, max_logprob_diff=0.9)
        stage.write_json("result.json", json.loads(broken.model_dump_json()))
    run.finish()
    agree, diff, first = judge_run(
        run,
        _criteria(
            "parity.token_agreement >= 0.99",
            "parity.max_logprob_diff <= 0.02",
            "parity.first_divergence >= 16",
        ),
    )
    assert (agree.verdict, diff.verdict, first.verdict) == ("fail", "fail", "fail")
    assert agree.estimate == 0.25 and "over 8 fixed prompts" in agree.note


def _judgeable_paths() -> list[tuple[Metric, str]]:
    """Every metric the registry calls judgeable, as a criterion path on ``full_run``."""
    prefix = {
        "serving": "serving.chat.",
        "training": "training.",
        "kernels": "kernels.rms_norm.",
        "collectives": "collectives.all_reduce.",
        "parity": "parity.",
    }
    from pocforge.bench.promscrape import SERVER_METRICS
    from pocforge.bench.run_metrics import TURN_METRICS

    def statistic(m: Metric) -> str:
        if not m.distribution:
            return ""
        return ".p50" if m.name in TURN_METRICS else ".p90"

    def section(m: Metric) -> str:
        if m.name in TURN_METRICS:
            return "serving.mt."
        if m.name == "kv_transfer_mb_per_request":
            return "serving.nixl."
        if m.name in EP_ALLTOALL_METRICS:
            return "collectives.ep_dispatch."
        return "serving.pd." if m.name in SERVER_METRICS else prefix[m.section]

    return [
        # p50: the multi-turn sweep has 4 first turns, too few for a p90
        (m, f"{section(m)}{m.name}{statistic(m)}")
        for m in METRICS.values()
        if m.name in judgeable(m.section)
    ]


@pytest.mark.parametrize(("found", "path"), _judgeable_paths(), ids=lambda x: getattr(x, "name", x))
def test_every_judgeable_metric_is_decided(full_run, found, path) -> None:
    """What validate accepts the judge decides: a threshold far on the good side passes,
    far on the bad side fails; never inconclusive on a run that has the metric."""
    far = 1e12 if found.better == "lower" else -1e12
    good, bad = ("<=", ">=") if found.better == "lower" else (">=", "<=")
    passed, failed = judge_run(
        full_run, _criteria(f"{path} {good} {far:g}", f"{path} {bad} {far:g}")
    )
    assert passed.verdict == "pass" and failed.verdict == "fail", (passed.note, failed.note)
    assert passed.estimate is not None


def test_pct_reference_is_judged_against_the_stored_reference(full_run) -> None:
    """The writer stores the reference the cluster stage compared with; the verdict is the
    run's busbw at its largest message over it (MI300X intra-node all_reduce, 315.9 GB/s)."""
    from pocforge.results.schema import load_document
    from pocforge.results.stage_schema import CollectiveResult

    (file,) = (full_run.path / "collectives").glob("*-intra_node.json")
    stored = load_document(file, CollectiveResult)
    assert (stored.scope, stored.host, stored.reference_busbw_gbs) == ("intra_node", "h1", 315.9)
    largest = max(stored.rows, key=lambda r: r.bytes)
    (verdict,) = judge_run(full_run, _criteria("collectives.all_reduce.pct_reference >= 95"))
    assert verdict.estimate == pytest.approx(100 * largest.busbw_gbs / 315.9)
    assert verdict.verdict == "pass" and "h1" in verdict.note


def test_pct_reference_without_a_reference_is_inconclusive_and_says_why(store) -> None:
    """A platform the reference table has nothing for: the result carries no reference and
    the criterion cannot be decided (never a pass)."""
    run = store.create(load_poc("demo"))
    (written,) = collectives_stage(run, None)  # the run's own spec: a cpu, no reference
    assert written.reference_busbw_gbs is None
    run.finish()
    (verdict,) = judge_run(run, _criteria("collectives.all_reduce.pct_reference >= 95"))
    assert verdict.verdict == "inconclusive" and "no busbw reference" in verdict.note


def test_validate_and_the_judge_read_one_list(monkeypatch, full_run, tmp_path, repo) -> None:
    """Take ``wrong`` off the registry's judgeable list: validate refuses the criterion and
    the judge leaves it undecided; neither keeps a list of its own."""
    import dataclasses

    import yaml

    from pocforge import metrics
    from pocforge.spec import SpecError, load_spec

    key = ("collectives", "wrong")
    monkeypatch.setitem(
        metrics.METRICS, key, dataclasses.replace(metrics.METRICS[key], judged=False)
    )
    spec = yaml.safe_load((repo / "pocs" / "demo" / "poc.yaml").read_text())
    spec["acceptance"]["criteria"] = ["collectives.all_reduce.wrong <= 0"]
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "poc.yaml").write_text(yaml.safe_dump(spec))
    with pytest.raises(SpecError, match="unknown collectives metric 'wrong'"):
        load_spec(tmp_path / "demo" / "poc.yaml")
    (verdict,) = judge_run(full_run, _criteria("collectives.all_reduce.wrong <= 0"))
    assert (
        verdict.verdict == "inconclusive" and "not a judgeable collectives metric" in verdict.note
    )


def test_a_criterion_pinned_to_a_point_is_judged_there(tmp_path):
    """``serving.chat.output_throughput.c2 >= X`` (each point has its own throughput) is
    judged at c2, whatever the operating point is, and does not choose it."""
    from pocforge.spec.acceptance_schema import Criterion

    pinned = Criterion(metric="serving.chat.output_throughput.c2", op=">=", threshold=1.0)
    assert (pinned.point, pinned.measure) == ("c2", ["serving", "chat", "output_throughput"])
    rate = Criterion(metric="serving.chat.ttft_ms.p99.9.r0.5", op="<=", threshold=1.0)
    assert (rate.point, rate.measure[-1]) == ("r0.5", "p99.9")
    assert Criterion(metric="serving.chat.ttft_ms.p99.9", op="<=", threshold=1.0).point is None


def test_a_pinned_criterion_on_a_real_run_is_reported_at_its_point(demo_run) -> None:
    """The demo's operating point is c8; a throughput criterion pinned to c1 is reported at
    c1 with c1's own throughput, and the unpinned criterion still at c8."""
    verdicts = judge_run(
        demo_run,
        _criteria("serving.chat.output_throughput.c1 >= 1", "serving.chat.ttft_ms.p90 <= 5000"),
    )
    pinned, free = verdicts
    assert pinned.point == "c1" and pinned.verdict == "pass"
    c1 = next(pv for pv in pinned.per_point if pv.point == "c1")
    assert pinned.estimate == c1.estimate
    assert free.point == "c8"
