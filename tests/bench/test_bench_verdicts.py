"""SLO parsing and pass/fail/inconclusive verdicts with bootstrap and t intervals."""

import numpy as np
import pytest

from pocforge.bench.verdicts import SLOError, judge, parse_slo


@pytest.mark.parametrize(
    "text, match",
    [
        ("ttft_ms:p99", "metric:statistic:threshold"),
        ("latency:p99:5", "unknown metric"),
        ("ttft_ms:p42x:5", "statistic must be"),
        ("request_throughput:p99:5", "one number per run"),
    ],
)
def test_bad_slos(text, match):
    with pytest.raises(SLOError, match=match):
        parse_slo(text)


def test_parse_slo():
    s = parse_slo("ttft_ms:p99.9:2000")
    assert (s.metric, s.statistic, s.threshold) == ("ttft_ms", "p99.9", 2000.0)


def test_pass_fail_inconclusive_for_lower_is_better():
    rng = np.random.default_rng(1)
    x = rng.normal(100.0, 10.0, 2000)
    p99 = np.percentile(x, 99)
    ok = judge(parse_slo("ttft_ms:p99:200"), [x])
    assert (
        ok.verdict == "pass"
        and ok.ci_low <= p99 <= ok.ci_high
        and ok.margin == pytest.approx(200 - p99)
    )
    bad = judge(parse_slo("ttft_ms:p99:100"), [x])
    assert bad.verdict == "fail" and bad.margin < 0
    edge = judge(parse_slo(f"ttft_ms:p99:{p99:f}"), [x])
    assert edge.verdict == "inconclusive" and edge.ci_low < p99 < edge.ci_high


def test_two_level_bootstrap_widens_with_run_to_run_spread():
    rng = np.random.default_rng(2)
    same = [rng.normal(100, 5, 300) for _ in range(3)]
    spread = [rng.normal(m, 5, 300) for m in (90, 100, 110)]
    a = judge(parse_slo("ttft_ms:median:150"), same)
    b = judge(parse_slo("ttft_ms:median:150"), spread)
    assert b.method == "hierarchical-bootstrap"
    assert (b.ci_high - b.ci_low) > 3 * (a.ci_high - a.ci_low)


def test_too_few_samples_for_a_tail_percentile_is_inconclusive():
    v = judge(parse_slo("ttft_ms:p99.9:1000"), [np.full(50, 10.0)])
    assert v.verdict == "inconclusive" and "needs at least 1000" in v.note


def test_scalar_metrics_use_repeats():
    hi = judge(parse_slo("output_throughput:mean:100"), per_repeat_values=[150.0, 155.0, 148.0])
    assert hi.verdict == "pass" and hi.method == "t-interval" and hi.margin == pytest.approx(51.0)
    straddle = judge(
        parse_slo("output_throughput:mean:150"), per_repeat_values=[140.0, 160.0, 150.0]
    )
    assert straddle.verdict == "inconclusive"
    low = judge(parse_slo("error_rate:mean:0.01"), per_repeat_values=[0.2])
    assert low.verdict == "fail" and low.method == "point" and "one repeat" in low.note
    none = judge(parse_slo("goodput:mean:1"), per_repeat_values=[None])
    assert none.verdict == "inconclusive"
