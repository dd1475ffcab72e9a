"""Metric math on hand-built timelines: what a stream's events mean for TTFT/ITL/TPOT/E2EL."""

import json

import numpy as np
import pytest

from pocforge.bench.client import RawResult, parse_stream
from pocforge.bench.records import RequestRecord
from pocforge.bench.request_metrics import build_record
from pocforge.bench.run_metrics import peak_concurrency, run_metrics, samples
from pocforge.stats import describe, t_interval


def ev(text=None, usage=None, chat=False):
    if text is None:
        return f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode()
    choice = {"delta": {"content": text}} if chat else {"text": text}
    return f"data: {json.dumps({'choices': [choice]})}\n\n".encode()


def record(reads, start=10.0, end=None, api="completions", **kw):
    raw = RawResult(
        start=start, end=end if end is not None else reads[-1][0], status=200, reads=reads
    )
    args = dict(
        point="c1",
        repeat=0,
        index=0,
        t0=9.0,
        scheduled_s=0.9,
        prompt_tokens=5,
        requested_output_tokens=4,
    )
    args.update(kw)
    return build_record(raw, api, **args)


def test_ttft_itl_e2el_tpot_from_a_timeline():
    """Four tokens at 10.1, 10.15, 10.2, 10.3 s; usage says 4; last byte at 10.31 s."""
    reads = [
        (10.1, ev("a")),
        (10.15, ev("b")),
        (10.2, ev("c")),
        (10.3, ev("d")),
        (10.31, ev(usage={"prompt_tokens": 7, "completion_tokens": 4}) + b"data: [DONE]\n\n"),
    ]
    r = record(reads)
    assert r.success
    assert r.ttft_ms == pytest.approx(100.0)
    assert r.itl_ms == pytest.approx([50.0, 50.0, 100.0])
    assert r.e2el_ms == pytest.approx(310.0)
    assert r.tpot_ms == pytest.approx((310.0 - 100.0) / 3)
    assert (r.output_tokens, r.output_tokens_source) == (4, "server")
    assert (r.prompt_tokens, r.prompt_tokens_source) == (7, "server")
    assert r.sent_s == pytest.approx(1.0) and r.client_lag_ms == pytest.approx(100.0)


def test_one_token_output_has_no_tpot_and_is_excluded_from_tpot_samples():
    r1 = record([(10.2, ev("x")), (10.25, ev(usage={"completion_tokens": 1}))])
    assert r1.success and r1.tpot_ms is None and r1.itl_ms == []
    r2 = record([(10.1, ev("a")), (10.3, ev("b"))], end=10.3)
    assert samples([r1, r2], "tpot_ms").tolist() == pytest.approx([200.0])
    assert samples([r1, r2], "ttft_ms").tolist() == pytest.approx([200.0, 100.0])


def test_empty_chunks_are_not_tokens():
    """An empty-text event (e.g. a partial UTF-8 byte, or chat's role event) starts no clock."""
    reads = [
        (10.05, ev("", chat=True)),
        (10.2, ev("hi", chat=True)),
        (10.25, ev("", chat=True)),
        (10.4, ev("yo", chat=True)),
    ]
    r = record(reads, api="chat")
    assert r.ttft_ms == pytest.approx(200.0)
    assert r.itl_ms == pytest.approx([200.0])
    assert r.empty_chunks == 2 and r.token_chunks == 2
    assert (r.output_tokens, r.output_tokens_source) == (2, "chunks")


def test_events_split_across_reads_and_batched_in_one_read():
    """An event belongs to the read that completes it; two events in one read share its time."""
    whole = ev("a") + ev("b")
    reads = [(10.1, whole[:10]), (10.2, whole[10:]), (10.3, ev("c")[:5]), (10.4, ev("c")[5:])]
    p = parse_stream(reads, "completions")
    assert p.token_times == [10.2, 10.2, 10.4] and p.text == "abc"


def test_crlf_comments_and_done():
    body = b": ping\r\n\r\n" + ev("a").replace(b"\n", b"\r\n") + b"data: [DONE]\r\n\r\n"
    p = parse_stream([(1.0, body)], "completions")
    assert p.token_times == [1.0] and p.text == "a" and p.error is None


def test_tokenizer_counts_when_the_server_sends_no_usage():
    r = record([(10.1, ev("ab")), (10.2, ev("cd"))], count_tokens=lambda s: len(s))
    assert (r.output_tokens, r.output_tokens_source) == (4, "tokenizer")
    assert r.tpot_ms == pytest.approx((200.0 - 100.0) / 3)


def test_failures():
    http = build_record(
        RawResult(10.0, 10.1, 503, [], "HTTP 503: busy"),
        "completions",
        point="p",
        repeat=0,
        index=1,
        t0=9.0,
        scheduled_s=1.0,
        prompt_tokens=5,
        requested_output_tokens=4,
    )
    assert not http.success and http.error.startswith("HTTP 503") and http.ttft_ms is None
    err = record([(10.1, b'data: {"error": {"message": "boom"}}\n\n')])
    assert not err.success and err.error == "boom"
    empty = record([(10.1, ev(usage={"completion_tokens": 0}) + b"data: [DONE]\n\n")])
    assert not empty.success and "without a token" in empty.error


def _rec(i, sent, e2el, ttft=100.0, tpot=10.0, out=10, ok=True):
    return RequestRecord(
        point="c2",
        repeat=0,
        index=i,
        success=ok,
        scheduled_s=sent,
        sent_s=sent,
        client_lag_ms=0.0,
        ttft_ms=ttft if ok else None,
        e2el_ms=e2el,
        tpot_ms=tpot if ok else None,
        itl_ms=[tpot] * (out - 1) if ok else [],
        prompt_tokens=20,
        output_tokens=out if ok else None,
    )


def test_run_metrics_throughputs_goodput_error_rate():
    recs = [
        _rec(0, 0.0, 500.0),
        _rec(1, 0.1, 500.0, ttft=300.0),
        _rec(2, 0.2, 50.0, ok=False),
        _rec(3, 0.6, 400.0),
    ]
    m = run_metrics(recs, duration_s=2.0, goodput_thresholds={"ttft_ms": 200.0}, gpus=2)
    assert m["request_throughput"] == pytest.approx(1.5)
    assert m["output_throughput"] == pytest.approx(15.0)
    assert m["total_token_throughput"] == pytest.approx(45.0)
    assert m["goodput"] == pytest.approx(1.0)
    assert m["output_throughput_per_gpu"] == pytest.approx(7.5)
    assert m["error_rate"] == pytest.approx(0.25)
    assert m["interactivity"]["mean"] == pytest.approx(100.0)
    assert m["itl_ms"]["n"] == 27
    assert peak_concurrency(recs) == 3


def test_describe_matches_numpy_and_t_interval():
    x = np.arange(1, 1001, dtype=float)
    d = describe(x)
    assert d["p99"] == pytest.approx(np.percentile(x, 99)) and d["p99.9"] == pytest.approx(999.001)
    assert d["median"] == d["p50"] == pytest.approx(500.5) and d["std"] == pytest.approx(np.std(x))
    assert describe([])["p50"] is None
    mean, lo, hi = t_interval([1.0, 2.0, 3.0])
    assert mean == 2.0 and hi - mean == pytest.approx(4.303 / np.sqrt(3))
    assert t_interval([5.0]) is None
