"""Energy criteria (``serving.<workload>.joules_per_token`` and its kin) from validation to
verdict: the spec accepts them on a GPU and on a `cpu` cluster, the judge decides them
from the per-repeat figures the runner put into the sweep, and a point whose telemetry
does not cover it, or a node without power readings, is inconclusive and says why."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pocforge.bench.summary import Summary
from pocforge.results.verdicts import judge_run
from pocforge.spec import load_poc, load_spec
from pocforge.spec.acceptance_schema import AcceptanceSpec
from pocforge.stats import t_interval
from tests.results.conftest import DATA
from tests.spec.conftest import GOOD
from tests.telemetry.sweeps import with_telemetry

# The store's provenance runs git.
pytestmark = pytest.mark.process


def _run(store, tmp_path: Path, **telemetry):
    run = store.create(load_poc("demo"))
    sweep = with_telemetry(DATA / "pocforge-sweep-a", tmp_path / "sweep", **telemetry)
    with run.stage("serving") as stage:
        stage.add_tree(sweep, "chat")
    run.finish()
    return run, Summary.model_validate_json((sweep / "summary.json").read_text())


def _criteria(*texts: str):
    return AcceptanceSpec.model_validate({"criteria": list(texts)}).criteria


@pytest.mark.parametrize("gpu", ["MI300X", "cpu"])
def test_energy_criteria_validate(tmp_path, gpu) -> None:
    """Not GPU-only: on a `cpu` cluster the CPU packages' RAPL energy is measured."""
    data = {**GOOD, "cluster": {"gpu": gpu, "nodes": 1, "gpus_per_node": 8 if gpu != "cpu" else 1}}
    if gpu == "cpu":
        data["serving"] = {**GOOD["serving"], "parallelism": {"tp": 1}}
    data["acceptance"] = {
        "criteria": [
            "serving.chat.joules_per_token <= 0.5",
            "serving.chat.tokens_per_s_per_kw >= 1000",
            "serving.chat.avg_power_w <= 700",
            "serving.chat.usd_per_million_tokens <= 2",
        ]
    }
    (tmp_path / "good").mkdir()
    (tmp_path / "good" / "poc.yaml").write_text(yaml.safe_dump(data))
    spec = load_spec(tmp_path / "good" / "poc.yaml")
    assert [c.parts[2] for c in spec.acceptance.criteria] == [
        "joules_per_token",
        "tokens_per_s_per_kw",
        "avg_power_w",
        "usd_per_million_tokens",
    ]


def test_joules_per_token_is_judged_at_every_point(store, tmp_path) -> None:
    """300 W on one GPU: each repeat's J/token is 300 W × its window / its output tokens
    (output tok/s × window, whole tokens); the verdict at a
    point is the Student-t interval over its two repeats against the threshold, and the
    criterion is reported at the highest-load point that meets it."""
    run, summary = _run(store, tmp_path, power_w=300.0)
    expected = {
        p.id: [
            300.0 * r.duration_s / round(r.metrics["output_throughput"] * r.duration_s)
            for r in p.repeats
        ]
        for p in summary.points
    }
    threshold = 0.5
    (v,) = judge_run(run, _criteria(f"serving.chat.joules_per_token <= {threshold}"))
    assert [pv.point for pv in v.per_point] == list(expected)
    for pv in v.per_point:
        mean, lo, hi = t_interval(expected[pv.point])
        assert pv.estimate == pytest.approx(mean)
        assert (pv.ci_low, pv.ci_high) == (pytest.approx(lo, rel=1e-4), pytest.approx(hi, rel=1e-4))
        want = "pass" if hi <= threshold else "fail" if lo > threshold else "inconclusive"
        assert pv.verdict == want, pv
    passing = [pv.point for pv in v.per_point if pv.verdict == "pass"]
    assert passing, "the fixture's faster points should be under 0.5 J/token at 300 W"
    assert v.point == passing[-1] and v.verdict == "pass"


def test_energy_of_a_window_the_samples_do_not_cover_is_inconclusive(store, tmp_path) -> None:
    """The samples stop as the first point's first window starts: that point has no energy
    figures (never a guess), its verdict is inconclusive, and its caveat says why; later
    points have no samples at all."""
    run, summary = _run(store, tmp_path, power_w=300.0, cut_s=0.0)
    (v,) = judge_run(run, _criteria("serving.chat.joules_per_token <= 10"))
    assert {pv.verdict for pv in v.per_point} == {"inconclusive"}
    assert "joules_per_token value not reported" in v.per_point[0].note
    notes = summary.points[0].notes
    assert len(notes) == 1 and "last sample" in notes[0] and "before the window end" in notes[0]
    from pocforge.results.run_reader import RunData

    ((result, _),) = RunData.load(run).serving.values()
    assert any("energy not measured" in c for c in result.points[0].caveats)


def test_a_node_without_power_has_no_energy_but_a_price(store, tmp_path) -> None:
    """Host telemetry only (this machine): J/token inconclusive, $/Mtok judged."""
    run, _ = _run(store, tmp_path, power_w=None, price=2.0)
    energy, usd = judge_run(
        run,
        _criteria(
            "serving.chat.joules_per_token <= 10", "serving.chat.usd_per_million_tokens <= 1e9"
        ),
    )
    assert energy.verdict == "inconclusive" and usd.verdict == "pass"
