"""Acceptance criteria judged on a real run with the serving bench's statistics."""

from __future__ import annotations

import pytest

from pocforge.results.verdicts import judge_run, overall
from pocforge.spec.schema import AcceptanceSpec
from pocforge.stats import decide, margin

# Starts a subprocess (git for provenance, patch, the CLI) or opens a local socket.
pytestmark = pytest.mark.process


@pytest.mark.parametrize(
    ("op", "lo", "hi", "expected"),
    [
        ("<=", 1, 4, "pass"), ("<=", 4, 6, "inconclusive"), ("<=", 6, 9, "fail"),
        ("<", 1, 5, "inconclusive"), (">=", 5, 9, "pass"), (">", 1, 5, "fail"), (">=", 1, 4, "fail"),
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
    verdicts = judge_run(demo_run, _criteria("serving.chat.ttft_ms.p99 <= 0.001",
                                             "serving.chat.output_throughput >= 1"))
    assert verdicts[0].verdict == "fail" and verdicts[1].verdict == "pass"
    assert "no sweep point met every criterion" in verdicts[0].note
    assert overall(verdicts) == "fail"
    missing = judge_run(demo_run, _criteria("serving.nope.ttft_ms.p99 <= 5"))[0]
    assert missing.verdict == "inconclusive" and "no serving result" in missing.note
