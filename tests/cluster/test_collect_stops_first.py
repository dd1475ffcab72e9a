"""collect.yml with ``collect_stop_launchers``: the launchers stopped (teardown's own steps)
before the run folder is listed, so what a profiler writes as its processes exit
(rocprofv3) is fetched. Run for real with ansible-playbook against this machine (a local
connection), on a launcher this test starts that writes its file on SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from pocforge.cluster.driver import PLAYBOOKS, run_playbook

pytestmark = pytest.mark.process

AT_EXIT = """
import pathlib, signal, sys, time
out = pathlib.Path(sys.argv[1])
def stop(*_):
    out.write_text("written at exit\\n")
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
pathlib.Path(sys.argv[2]).write_text("ready")
while True:
    time.sleep(0.1)
"""


@pytest.mark.parametrize("stop_first", [True, False])
def test_the_launchers_are_stopped_before_the_files_are_listed(tmp_path, stop_first):
    remote = tmp_path / "node-run"
    (remote / "profiles").mkdir(parents=True)
    ready = tmp_path / "ready"
    launcher = subprocess.Popen(
        [sys.executable, "-c", AT_EXIT, str(remote / "profiles" / "kernel_stats.csv"), str(ready)]
    )
    # reaped as it exits, as init reaps a node's setsid launcher (a zombie keeps its /proc)
    reaper = threading.Thread(target=launcher.wait, daemon=True)
    reaper.start()
    try:
        deadline = time.monotonic() + 30
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        pid_file = remote / "serve.pid"
        pid_file.write_text(f"{launcher.pid}\n")
        inventory = tmp_path / "inventory.yml"
        inventory.write_text(
            "all:\n  hosts:\n    node0:\n"
            f"      ansible_connection: local\n      ansible_python_interpreter: {sys.executable}\n"
        )
        dest = tmp_path / "collected"
        result = run_playbook(
            PLAYBOOKS["collect"],
            inventory,
            tmp_path / "run",
            extravars={
                "collect_remote_dirs": [str(remote)],
                "collect_dest": str(dest),
                "collect_recorder_pid_file": str(remote / "telemetry.pid"),
                "collect_stop_launchers": stop_first,
                "teardown_pid_files": [str(pid_file)],
            },
        )
        assert result.hosts["node0"].status == "ok", result.hosts["node0"].error
        fetched = dest / "node0" / str(remote / "profiles" / "kernel_stats.csv").lstrip("/")
        if stop_first:
            reaper.join(timeout=5)
            assert launcher.returncode == 0
            assert fetched.read_text() == "written at exit\n"
            assert not pid_file.exists()
        else:  # collect alone leaves the launcher to teardown, and fetches what there is
            assert launcher.poll() is None and not fetched.exists()
    finally:
        if launcher.poll() is None:
            os.kill(launcher.pid, signal.SIGKILL)
            launcher.wait()
