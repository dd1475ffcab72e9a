"""SIGKILL of one DeepSpeed rank mid-run: the stage fails at once naming the rank and how
it died (the launcher's report, no traceback), the steps done so far stay in the run
(``steps.jsonl``), the run verifies, and ``--resume`` trains it to the end."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.tinypoc import tiny_training

from .conftest import FaultRow

pytestmark = [
    pytest.mark.integration,
    pytest.mark.budget(300, "DeepSpeed on 2 ranks, one killed, then resumed"),
]
POCFORGE = str(Path(sys.executable).parent / "pocforge")
STEPS = 200  # long enough (about 8 s of steps here) for the kill to land mid-run


def rank_pids(local_rank: int, workspace: Path) -> list[int]:
    """This test's training driver ranks with this LOCAL_RANK (read from /proc): those
    working in ``workspace``, not another test's training running beside it."""
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            cmdline = (environ.parent / "cmdline").read_bytes()
            if b"pocforge.training.driver" not in cmdline:
                continue
            if not Path(os.readlink(environ.parent / "cwd")).is_relative_to(workspace):
                continue
            env = environ.read_bytes().split(b"\0")
        except OSError:
            continue
        if f"LOCAL_RANK={local_rank}".encode() in env:
            found.append(int(environ.parent.name))
    return found


def test_sigkill_of_one_training_rank(tmp_path, fault_table):
    spec = {
        "poc": {"name": "rankdies", "customer": "pocforge tests", "owner": "tests"},
        "model": {
            "id": "model",
            "dtype": "float32",
            "max_model_len": 512,
            "tiny": {"arch": "llama"},
        },
        "cluster": {"gpu": "cpu", "gpus_per_node": 1},
        "training": tiny_training(STEPS),
        "acceptance": {"criteria": ["training.final_loss < 50"]},
    }
    (tmp_path / "pocs" / "rankdies").mkdir(parents=True)
    (tmp_path / "pocs" / "rankdies" / "poc.yaml").write_text(yaml.safe_dump(spec))
    log = tmp_path / "run.log"
    proc = subprocess.Popen(
        [POCFORGE, "run", "rankdies"], cwd=tmp_path, stdout=log.open("w"), stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 600
        steps = None
        while time.monotonic() < deadline and proc.poll() is None:
            found = list((tmp_path / "results" / "rankdies").glob("*/training/steps.jsonl"))
            if found and len(found[0].read_text().splitlines()) >= 10:
                steps = found[0]
                break
            time.sleep(0.1)
        assert steps is not None, log.read_text()[-3000:]
        (victim,) = rank_pids(1, tmp_path)
        os.kill(victim, signal.SIGKILL)
        code = proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    output = log.read_text()
    assert code == 1, output[-3000:]
    assert "Traceback" not in output
    # torchrun names the host by its fully qualified name, whatever this machine calls itself
    assert re.search(r"rank 1 \(local rank 1 on \S+\) was killed by SIGKILL", output), output[
        -3000:
    ]
    run = steps.parent.parent
    kept = len(steps.read_text().splitlines())
    assert 10 <= kept < STEPS and f"{kept} of {STEPS} steps done" in output
    manifest = json.loads((run / "run.json").read_text())
    assert manifest["stages"]["training"]["status"] == "failed"
    assert "training/steps.jsonl" in manifest["files"]  # checksummed with the stage
    checked = subprocess.run(
        [POCFORGE, "results", "verify", str(run)], capture_output=True, text=True, timeout=120
    )
    assert checked.returncode == 0, checked.stdout
    left = rank_pids(0, tmp_path) + rank_pids(1, tmp_path)
    assert not left  # the launcher took the other rank down
    resumed = subprocess.run(
        [POCFORGE, "run", "rankdies", "--resume", run.name],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-2000:]
    assert "overall: PASS" in resumed.stdout
    manifest = json.loads((run / "run.json").read_text())
    assert manifest["stages"]["training.attempt-1"]["status"] == "failed"
    fault_table.add(
        FaultRow(
            "SIGKILL of one DeepSpeed rank",
            tried=1,
            readable=1,
            lost=0,
            resumed=1,
            note=f"stage failed naming rank 1 and SIGKILL; {kept} steps kept",
        )
    )
