"""SIGKILL of the benchmark client at seeded instants: after each, the summary and every
record file read, and every request the server had finished before the kill is a record
(the instrument's own log of finished streams is the truth)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time

import pytest

from benchmarks.scripted_server import running_instrument

from ._bench import bench_cmd, lag, records_in, reset
from .conftest import INSTANTS, SEED, FaultRow

pytestmark = pytest.mark.integration

# a client run is seconds: make faults' 20 (POCFORGE_FAULT_INSTANTS), and 5 in make test
# (20 there were 54 s of the suite)
KILLS = max(5, INSTANTS)
# A stream the server finished this long before the kill has surely reached the client's
# loop (one local socket hop); one finished later may still have been in flight.
MARGIN_S = 0.25


def test_sigkill_of_the_client_at_seeded_instants_loses_no_finished_request(
    tmp_path, tiny_llama, fault_table
):
    rng = random.Random(SEED)
    lost_total, readable, finished_total = 0, 0, 0
    with running_instrument(10.0, 10.0) as url:
        for k in range(KILLS):
            out = tmp_path / f"kill-{k}"
            reset(url)
            cmd = bench_cmd(url, tiny_llama, out, prompts=40, concurrency="2,4", osl=20)
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            try:
                time.sleep(rng.uniform(1.0, 6.0))
                killed_at = time.monotonic()
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
            finally:
                if proc.poll() is None:
                    proc.kill()
            finished = [t for t in lag(url)["completed_at"] if t <= killed_at - MARGIN_S]
            records, torn = records_in(out)
            ok = sum(r.success for r in records)
            lost = max(0, len(finished) - ok)
            lost_total += lost
            finished_total += len(finished)
            summary_reads = True
            if (out / "summary.json").exists():  # absent only when killed before it started
                try:
                    json.loads((out / "summary.json").read_text())
                except ValueError:
                    summary_reads = False
            readable += summary_reads and torn == 0
            assert summary_reads and torn == 0, f"kill {k}: summary or records torn"
            assert lost == 0, f"kill {k}: {len(finished)} finished before the kill, {ok} recorded"
    assert finished_total > 0  # the instants did land while requests were being served
    fault_table.add(
        FaultRow(
            "SIGKILL of `pocforge bench serve`",
            tried=KILLS,
            readable=readable,
            lost=lost_total,
            resumed=None,
            note=f"{finished_total} requests finished before the kills, all recorded",
        )
    )
