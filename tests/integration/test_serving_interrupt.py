"""SIGINT mid-sweep: finished points and finished requests are kept, the summary says so."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from benchmarks.scripted_server import running_instrument
from pocforge.bench.records import read_records
from pocforge.tiny_model.make import make_tiny

pytestmark = pytest.mark.integration


def test_sigint_keeps_finished_points_and_requests(tmp_path):
    tiny = make_tiny(tmp_path / "tiny", "llama")
    out = tmp_path / "run"
    with running_instrument(20.0, 20.0) as url:
        cmd = [
            sys.executable,
            "-c",
            "from pocforge.cli.bench import bench; bench()",
            "serve",
            "--base-url",
            url,
            "--model",
            "instrument",
            "--tokenizer",
            str(tiny),
            "--isl",
            "8",
            "--osl",
            "25",
            "--concurrency",
            "1,2,3",
            "--num-prompts",
            "6",
            "--repeats",
            "2",
            "--quiet",
            "--out",
            str(out),
        ]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 90
            # Wait until point c2 (index 1) is under way: its first repeat has been summarised.
            while True:
                assert time.monotonic() < deadline and proc.poll() is None
                try:
                    pts = json.loads((out / "summary.json").read_text())["points"]
                except (FileNotFoundError, json.JSONDecodeError):
                    pts = []
                if (
                    len(pts) >= 1
                    and pts[0]["status"] == "ok"
                    and len(pts[0]["repeats"]) == 2
                    and (out / "requests-c2.jsonl").exists()
                ):
                    break
                time.sleep(0.05)
            # c2 is under way; one request there takes ~0.5 s (20 ms TTFT + 24 x 20 ms), so
            # after 1.2 s some have finished and its first repeat (3 rounds) has not.
            time.sleep(1.2)
            proc.send_signal(signal.SIGINT)
            stdout, stderr = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "interrupted" in stderr
    s = json.loads((out / "summary.json").read_text())
    assert s["status"] == "interrupted"
    first = s["points"][0]
    assert first["status"] == "ok" and [r["completed"] for r in first["repeats"]] == [6, 6]
    assert [p["id"] for p in s["points"]] == ["c1", "c2"]  # c3 never started
    second = s["points"][1]
    assert second["status"] == "interrupted" and second["repeats"][-1]["status"] == "interrupted"
    recs = read_records(out / "requests-c2.jsonl")
    assert recs and all(r.success for r in recs)  # only finished requests are recorded
    assert len(recs) == sum(r["completed"] for r in second["repeats"])
