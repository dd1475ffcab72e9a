"""The kit's node launcher runs on a node that has no kit: copied with its modules into a folder and
run by the system's ``python3 -I`` (isolated: no site-packages, no PYTHONPATH), it starts
the launches of a plan file as the workload role writes it, reports as the role expects,
and stops them on SIGTERM."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pocforge.cluster.workload import launcher_files
from pocforge.frameworks.launch_plan import NodeLaunch
from pocforge.frameworks.process import free_port

pytestmark = pytest.mark.process

PYTHON = shutil.which("python3", path="/usr/bin:/bin") or sys.executable

SERVER = """
import functools, http.server, sys
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=".")
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), handler).serve_forever()
"""


def node_folder(tmp_path: Path, kind: str, launches: list[NodeLaunch]) -> Path:
    folder = tmp_path / "node"
    folder.mkdir()
    for one in launcher_files():  # as the role does
        shutil.copy(one, folder)
    plan = {
        "poc": "p",
        "node_rank": 0,
        "timeout_s": 60,
        "launches": [one.as_dict() for one in launches],
    }
    (folder / f"{kind}.launches.json").write_text(json.dumps(plan))
    return folder


def test_run_mode_writes_the_files_runs_in_the_folder_and_returns_the_exit_code(tmp_path):
    trainer = NodeLaunch(
        "training",
        "deepspeed",
        0,
        "127.0.0.1",
        "trainer",
        [
            PYTHON,
            "-c",
            "import pathlib,sys; pathlib.Path('out').write_text(open('cfg').read()); sys.exit(3)",
        ],
        files={"cfg": "from the plan\n"},
    )
    folder = node_folder(tmp_path, "train", [trainer])
    done = subprocess.run(
        [PYTHON, "-I", "node_launcher.py", "run", "train.launches.json"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 3, done.stderr
    assert (folder / "out").read_text() == "from the plan\n"
    assert "deepspeed trainer exited with code 3" in done.stdout
    assert [p.name for p in (folder / "logs").iterdir()] == ["p-deepspeed-rank0-trainer.log"]


def test_serve_mode_reports_healthy_and_stops_the_group_on_sigterm(tmp_path):
    port = free_port()
    server = NodeLaunch(
        "serving",
        "vllm",
        0,
        "127.0.0.1",
        "server",
        [PYTHON, "-c", SERVER, str(port)],
        files={"health": "ok\n"},
        health_url=f"http://127.0.0.1:{port}/health",
    )
    folder = node_folder(tmp_path, "serve", [server])
    log = (folder / "serve.log").open("w")
    launcher = subprocess.Popen(
        [PYTHON, "-I", "node_launcher.py", "serve", "serve.launches.json"],
        cwd=folder,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while "is serving at" not in (folder / "serve.log").read_text():
            assert launcher.poll() is None, (folder / "serve.log").read_text()
            assert time.monotonic() < deadline, (folder / "serve.log").read_text()
            time.sleep(0.2)
        report = (folder / "serve.log").read_text()
        assert f"p is serving at http://127.0.0.1:{port}/v1" in report
        server_pid = int(report.split("(pid ")[1].split(")")[0])
        launcher.send_signal(signal.SIGTERM)
        assert launcher.wait(timeout=40) == 0
        assert "stopping" in (folder / "serve.log").read_text()
        with pytest.raises(ProcessLookupError):
            os.kill(server_pid, 0)
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
        log.close()
