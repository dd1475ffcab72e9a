"""Golden tests of the comparison maths."""

from __future__ import annotations

import numpy as np
import pytest

from pocforge.results.compare import (
    Cost,
    classify,
    compare_competitor,
    compare_runs,
    interpolate,
    pareto_front,
)
from pocforge.results.run_reader import RunData
from pocforge.results.stage_schema import ServingPoint, ServingResult
from pocforge.stats import bootstrap_difference as bootstrap_diff
from pocforge.stats import welch_interval

# Starts a subprocess (git for provenance, patch, the CLI) or opens a local socket.
pytestmark = pytest.mark.process


def test_welch_golden() -> None:
    """a = [10, 11, 12], b = [13, 15, 17]: diff 4, se = sqrt(1/3 + 4/3) = 1.29099,
    df = (5/3)^2 / ((1/3)^2/2 + (4/3)^2/2) = 2.9412 -> t(2) = 4.303 (floor, conservative)."""
    diff, lo, hi = welch_interval([10, 11, 12], [13, 15, 17])
    se = np.sqrt(1 / 3 + 4 / 3)
    assert diff == 4.0
    assert lo == pytest.approx(4 - 4.303 * se) and hi == pytest.approx(4 + 4.303 * se)
    assert welch_interval([1.0], [2.0, 3.0]) is None


def test_bootstrap_diff_is_deterministic_and_covers() -> None:
    rng = np.random.default_rng(1)
    a, b = rng.normal(100, 10, 400), rng.normal(110, 10, 400)
    est, lo, hi = bootstrap_diff(a, b, "mean", seed=3)
    assert (est, lo, hi) == bootstrap_diff(a, b, "mean", seed=3)
    assert est == pytest.approx(b.mean() - a.mean()) and lo < est < hi and lo > 0
    est99, lo99, hi99 = bootstrap_diff(a, a.copy(), "p99", seed=0)
    assert est99 == 0 and lo99 <= 0 <= hi99


@pytest.mark.parametrize(
    ("delta", "lo", "hi", "better", "expected"),
    [
        (-5.0, -8.0, -1.0, "lower", "better"),
        (5.0, 1.0, 8.0, "lower", "worse"),
        (5.0, 1.0, 8.0, "higher", "better"),
        (1.0, -2.0, 3.0, "higher", "same"),
        (3.0, None, None, "higher", "same"),  # +3% of 100 is inside the 5% band
        (-30.0, None, None, "higher", "worse"),
    ],
)
def test_classify(delta, lo, hi, better, expected) -> None:
    assert classify(delta, lo, hi, better, 100.0) == expected


def test_pareto_and_interpolation_golden() -> None:
    pts = [(10, 100), (20, 90), (15, 80), (30, 40), (5, 95)]
    assert pareto_front(pts) == [(10, 100), (20, 90), (30, 40)]
    front = pareto_front(pts)
    assert interpolate(front, 25) == pytest.approx(65.0)
    assert interpolate(front, 10) == 100 and interpolate(front, 40) is None


def _result(name: str, pts: list[tuple[float, float]], gpus: int) -> ServingResult:
    return ServingResult(
        workload="chat",
        tool="test",
        gpus=gpus,
        points=[
            ServingPoint(
                id=f"c{i}",
                mode="concurrency",
                value=float(i),
                metrics={
                    "tpot_ms": {"median": 1000.0 / x},
                    "output_throughput": {"value": y * gpus},
                },
            )
            for i, (x, y) in enumerate(pts)
        ],
    )


def test_competitor_per_gpu_dollar_watt_golden() -> None:
    """Ours 8 GPUs, theirs 4: compared per GPU; $2 vs $4 per GPU-hour doubles our ratio."""
    ours = _result("ours", [(10, 1000), (20, 800), (40, 300)], gpus=8)
    theirs = _result("theirs", [(10, 500), (30, 400)], gpus=4)
    c = compare_competitor(
        "H200",
        ours,
        theirs,
        Cost(gpus=8, price_per_gpu_hour=2.0, power_w_per_gpu=750),
        Cost(gpus=4, price_per_gpu_hour=4.0, power_w_per_gpu=700),
        min_interactivity=15,
    )
    assert c.ours_best == pytest.approx(800) and c.theirs_best == pytest.approx(400)
    assert c.ratio_best == pytest.approx(2.0)
    assert c.ratio_per_dollar == pytest.approx(4.0)
    assert c.ratio_per_watt == pytest.approx((800 / 750) / (400 / 700))
    at20 = next(a for a in c.at_interactivity if a.interactivity == 20)
    assert at20.ours == pytest.approx(800) and at20.theirs == pytest.approx(450)


def test_run_vs_run_on_real_sweeps(store) -> None:
    """Two real sweeps of the same server: every delta has an interval or a band verdict."""
    from tests.results.conftest import build_demo_run

    a, b = build_demo_run(store, "pocforge-sweep-b"), build_demo_run(store, "pocforge-sweep-a")
    deltas = compare_runs(RunData.load(a), RunData.load(b))
    assert {d.point for d in deltas} == {"c1", "c2", "c4", "c8"}
    boot = [d for d in deltas if d.method == "bootstrap"]
    welch = [d for d in deltas if d.method == "welch"]
    assert boot and welch and all(d.ci_low <= d.ci_high for d in boot + welch)
    for d in deltas:
        assert (
            d.delta == pytest.approx(d.candidate - d.baseline, rel=1e-6) or d.method == "bootstrap"
        )
