"""scripts/gpu-kernels.sh, the one-call kernel benchmark for a lent GPU, rehearsed on this CPU.

On a CPU the benchmark checks correctness only; what is tested here is the script's own
work: the checkout used in place without an install, one process per op, a failed op
kept as a failed row while the others' results survive, one merged document.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(tmp_path, ops):
    env = dict(os.environ, PYTHON=sys.executable, OUT=str(tmp_path / "out"), OPS=ops)
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu-kernels.sh")],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def test_rehearsal_merges_every_op_and_uses_the_checkout_in_place(tmp_path):
    proc = _run(tmp_path, "rms_norm silu_and_mul")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = tmp_path / "out"
    env_txt = (out / "env.txt").read_text()
    assert "torch" in env_txt and "triton" in env_txt
    assert "/site/pocforge_kernels/__init__.py" in env_txt  # not the installed copy
    doc = json.loads((out / "kernels-bench.json").read_text())
    assert [row["op"] for row in doc["rows"]] == ["rms_norm", "silu_and_mul"]
    assert all(row["correct"] for row in doc["rows"]) and doc["timed"] is False
    assert "== silu_and_mul" in (out / "kernels-bench.log").read_text()


def test_a_failed_op_is_a_failed_row_and_the_rest_survive(tmp_path):
    proc = _run(tmp_path, "rms_norm no_such_op")
    assert proc.returncode == 1
    doc = json.loads((tmp_path / "out" / "kernels-bench.json").read_text())
    rows = {row["op"]: row for row in doc["rows"]}
    assert rows["rms_norm"]["correct"] is True
    assert rows["no_such_op"]["correct"] is False and "no result" in rows["no_such_op"]["error"]
    assert "!! no_such_op exited with" in (tmp_path / "out" / "kernels-bench.log").read_text()


def test_ops_past_the_budget_are_skipped_and_reported(tmp_path):
    """A lent machine allows 10 minutes a call: the loop stops starting ops near its budget."""
    env = dict(os.environ, PYTHON=sys.executable, OUT=str(tmp_path / "out"), OPS="rms_norm")
    env["BUDGET_S"] = "10"  # under the 20 s an op needs to be started
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu-kernels.sh")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 1
    assert "!! rms_norm skipped: the 10 s budget is spent" in proc.stdout
    assert "no op left a result" in proc.stderr
