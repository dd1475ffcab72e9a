"""Timing accuracy: against a server whose TTFT and ITL are scripted, the client reads them."""

import json
import urllib.request

import numpy as np
import pytest

from pocforge.bench.config import SweepConfig
from pocforge.bench.datasets import DatasetConfig
from pocforge.bench.records import read_records
from pocforge.bench.sweep import run_sweep

# Starts a subprocess (git for provenance, patch, the CLI) or opens a local socket.
pytestmark = pytest.mark.process

TTFT_MS, ITL_MS = 50.0, 10.0  # as scripted by the instrument fixture in conftest.py


def _lag(url):
    return json.loads(urllib.request.urlopen(url + "/lag").read())


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_client_reads_the_scripted_timeline(instrument, tiny_dir, tmp_path, api):
    urllib.request.urlopen(urllib.request.Request(instrument + "/lag/reset", method="POST")).read()
    cfg = SweepConfig(
        base_url=instrument,
        model="instrument",
        api=api,
        tokenizer=str(tiny_dir),
        dataset=DatasetConfig(isl="16", osl="10"),
        values=[4],
        num_prompts=24,
        warmup=4,
        slos=["ttft_ms:p50:1000"],
    )
    s = run_sweep(cfg, tmp_path)
    lag = _lag(instrument)
    first_lag = float(np.median(lag["first_ms"]))
    recs = read_records(tmp_path / "requests-c4.jsonl")
    assert len(recs) == 24 and all(r.success for r in recs)  # warm-up not recorded
    ttft = np.array([r.ttft_ms for r in recs])
    truth = TTFT_MS + first_lag
    # Nobody can see a token before the server wrote it; and our excess stays small.
    assert ttft.min() >= TTFT_MS - 0.5
    assert 0 <= np.median(ttft) - truth < 8.0
    itl = np.concatenate([r.itl_ms for r in recs])
    assert itl.size == 24 * 9 and abs(np.median(itl) - ITL_MS) < 1.0
    assert all(r.output_tokens == 10 and r.output_tokens_source == "server" for r in recs)
    tpot = np.array([r.tpot_ms for r in recs])
    assert abs(np.median(tpot) - ITL_MS) < 1.5
    rep = s.points[0].repeats[0]
    assert rep.peak_concurrency == 4 and rep.completed == 24
    assert rep.client.cpu_ms_per_chunk is not None and rep.client.loop_lag_ms["n"] > 10
    assert rep.metrics["ttft_ms"]["p50"] == pytest.approx(np.median(ttft))
    assert s.points[0].verdicts[0].verdict == "pass"


def test_open_loop_rate_is_offered_and_achieved(instrument, tiny_dir, tmp_path):
    cfg = SweepConfig(
        base_url=instrument,
        model="instrument",
        tokenizer=str(tiny_dir),
        dataset=DatasetConfig(isl="8", osl="2"),
        mode="rate",
        values=[40.0],
        num_prompts=80,
    )
    rep = run_sweep(cfg, tmp_path).points[0].repeats[0]
    assert rep.offered_rate == 40.0 and rep.achieved_rate == pytest.approx(40.0, rel=0.35)
    recs = read_records(tmp_path / "requests-r40.jsonl")
    lags = np.array([r.client_lag_ms for r in recs])
    assert np.median(lags) < 5.0  # sends leave when scheduled
    assert rep.client.send_delay_ms["p50"] == pytest.approx(np.median(lags))


def test_instrument_clock_starts_when_the_request_is_complete(instrument):
    """Headers now, body 200 ms later: the first token comes TTFT after the body, and the
    instrument's own lateness for it is small (its clock did not start at the headers)."""
    import socket
    import time
    from urllib.parse import urlsplit

    urllib.request.urlopen(urllib.request.Request(instrument + "/lag/reset", method="POST")).read()
    u = urlsplit(instrument)
    body = b'{"max_tokens": 2}'
    head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body)
    with socket.create_connection((u.hostname, u.port), timeout=5) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.sendall(head)
        time.sleep(0.2)
        t0 = time.perf_counter()
        s.sendall(body)
        got = b""
        while b"tok" not in got:
            got += s.recv(65536)
        first = (time.perf_counter() - t0) * 1000.0
    assert got.startswith(b"HTTP/1.1 200 OK") and b"Transfer-Encoding: chunked" in got
    lag = _lag(instrument)["first_ms"]
    assert len(lag) == 1 and abs(lag[0]) < 20.0
    assert TTFT_MS - 1.0 <= first < TTFT_MS + lag[0] + 20.0
