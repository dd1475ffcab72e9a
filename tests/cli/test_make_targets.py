"""The ``make`` targets with wrong arguments: each stops at once with a line that names
what is wrong and how to put it right, never a traceback (make's own exit status, 2)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.process
REPO = Path(__file__).resolve().parents[2]

CASES = [
    # (make arguments, what the error must name)
    (["poc", "POC="], "make poc needs POC=<name>, one of: "),
    (["report", "POC="], "make report needs POC=<name>"),
    (["cluster-up", "POC= "], "make cluster-up needs POC=<name>"),
    (["poc", "POC=no-such-poc"], "no-such-poc"),
    (["poc", "POC=demo", "RUN=no-such-run"], "no-such-run"),
    (["report", "POC=no-such-poc"], "no-such-poc"),
    (["rehearse", "POC=no-such-poc"], "no-such-poc"),
    (["rehearse", "POC=tiny-llama-2node-fp32-cpu-vllm", "RUNTIME=nonsense"], "nonsense"),
    (["patch-check", "POC=no-such-poc"], "no-such-poc"),
    (["cluster-check", "POC=no-such-poc"], "no-such-poc"),
    (
        ["faults", "INSTANTS=many", "PYTEST_ARGS=--collect-only -q"],
        "POCFORGE_FAULT_INSTANTS='many'",
    ),
]


@pytest.mark.parametrize(("args", "named"), CASES, ids=[" ".join(a) for a, _ in CASES])
def test_a_make_target_with_a_wrong_argument_says_what_and_stops(args, named, tmp_path):
    done = subprocess.run(
        ["make", "--no-print-directory", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "POCFORGE_RESULTS": str(tmp_path)},
    )
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    assert "Traceback" not in output
    assert named in output, output[-2000:]
    assert not list(tmp_path.glob("*/*/run.json")), "a run was started"
