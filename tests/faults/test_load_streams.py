"""The load generator at 1,000 concurrent streams against the scripted instrument: every
request the instrument finished is a record, 1,000 streams were in flight at once, and the
client's memory per request stays small. Records go to disk as they finish; what the
client keeps of each until its repeat's metrics are computed (a slotted ``Measured``:
latencies, token counts) is all that grows with the requests: measured as the peak RSS of
a run with 4× the requests less the smaller run's, per 1,000 requests (1.2 MB here), it
must stay under 3 MB (a client that kept each whole ``RequestRecord``, as it did before,
measured 4.3 MB; one that kept the streamed bodies, or leaked connections, more)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from benchmarks.scripted_server import running_instrument

from ._bench import bench_cmd, lag, records_in, reset
from .conftest import FaultRow

pytestmark = [
    pytest.mark.integration,
    pytest.mark.budget(300, "1,000 concurrent streams against the instrument, twice, RSS measured"),
]

STREAMS = 1000
SMALL, LARGE = 2000, 8000  # requests per run
PER_1K_MB = 3.0  # peak RSS the client may add per 1,000 more requests in a repeat


def peak_rss_mb(cmd: list[str], timeout_s: float) -> tuple[int, float, str]:
    """Run ``cmd``; its exit code, its peak resident memory (``VmHWM``, read until it
    exits) and its stderr."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    status = Path(f"/proc/{proc.pid}/status")
    peak_kb, deadline = 0, time.monotonic() + timeout_s
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                for line in status.read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        peak_kb = max(peak_kb, int(line.split()[1]))
            except OSError:
                pass
            time.sleep(0.05)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, peak_kb / 1024, err


def in_flight_at_once(records) -> int:
    """The most requests in flight at one instant, from their send and end times."""
    events = []
    for r in records:
        events += [(r.sent_s, 1), (r.sent_s + r.e2el_ms / 1000.0, -1)]
    most = now = 0
    for _, step in sorted(events):
        now += step
        most = max(most, now)
    return most


def test_a_thousand_concurrent_streams_keep_every_record_in_bounded_memory(
    tmp_path, tiny_llama, fault_table
):
    peaks, kept = {}, 0
    # each stream is 0.5 s of server time: long enough for 1,000 to overlap on 2 cores
    with running_instrument(100.0, 40.0) as url:
        for prompts in (SMALL, LARGE):
            reset(url)
            out = tmp_path / f"n{prompts}"
            cmd = bench_cmd(url, tiny_llama, out, prompts=prompts, concurrency=str(STREAMS), osl=10)
            code, peaks[prompts], err = peak_rss_mb(cmd, timeout_s=600)
            assert code == 0, err[-3000:]
            records, torn = records_in(out)
            finished = len(lag(url)["completed_at"])
            ok = [r for r in records if r.success]
            assert torn == 0 and len(records) == prompts, (len(records), torn)
            assert len(ok) == finished == prompts, (len(ok), finished)
            kept += len(ok)
            most = in_flight_at_once(ok)
            assert most >= 0.9 * STREAMS, f"only {most} streams were in flight at once"
    growth = peaks[LARGE] - peaks[SMALL]
    per_1k = growth / ((LARGE - SMALL) / 1000)
    assert per_1k < PER_1K_MB, f"peak RSS {peaks[SMALL]:.0f} MB -> {peaks[LARGE]:.0f} MB"
    fault_table.add(
        FaultRow(
            f"load: {STREAMS:,} concurrent streams ({SMALL:,} and {LARGE:,} requests)",
            tried=2,
            readable=2,
            lost=0,
            resumed=None,
            note=(
                f"{kept:,} requests, every one a record; client peak RSS "
                f"{peaks[SMALL]:.0f} MB and {peaks[LARGE]:.0f} MB ({per_1k:.1f} MB per 1,000 more)"
            ),
        )
    )
