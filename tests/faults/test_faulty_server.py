"""A server that answers HTTP 500s, malformed SSE, a stalled stream and connection resets:
each such request is a record with its reason, the sweep goes on to its next point, and
``error_rate`` is exactly the share the server spoiled."""

from __future__ import annotations

import json
import subprocess

import pytest

from benchmarks.scripted_server import FAULTS, running_instrument
from pocforge.bench.records import read_records

from ._bench import bench_cmd, lag
from .conftest import FaultRow

pytestmark = pytest.mark.integration

# What the client records for each of the instrument's faults (the reason, not a guess).
REASONS = {
    "500": "HTTP 500",
    "malformed": "unparseable event",
    "stall": "no complete response after 2 s",
    "reset": "Connection reset by peer",
}


def test_faulty_answers_are_errors_with_their_reason_and_the_sweep_goes_on(
    tmp_path, tiny_llama, fault_table
):
    out = tmp_path / "sweep"
    with running_instrument(10.0, 10.0, faults=FAULTS, fault_every=4) as url:
        cmd = bench_cmd(url, tiny_llama, out, prompts=16, concurrency="1,4", timeout=2)
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        served = lag(url)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert [p["id"] for p in summary["points"]] == ["c1", "c4"]  # the sweep went on
    assert summary["status"] == "complete"
    errors: list[str] = []
    for point in summary["points"]:
        records = read_records(out / point["records_file"])
        assert len(records) == 16  # every request is a record, spoiled or not
        failed = [r for r in records if not r.success]
        assert len(failed) == 4  # every 4th request: one of each fault per point
        errors += [r.error or "" for r in failed]
        assert point["repeats"][0]["metrics"]["error_rate"] == pytest.approx(4 / 16)
    for kind, reason in REASONS.items():
        assert sum(reason in e for e in errors) == served["faulted"][kind] == 2, (kind, errors)
    fault_table.add(
        FaultRow(
            "server: HTTP 500, malformed SSE, stalled stream, reset (2 each)",
            tried=8,
            readable=8,
            lost=0,
            resumed=None,
            note="each an error record with its reason; error_rate 0.25 = 4/16 per point",
        )
    )
