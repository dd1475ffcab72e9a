"""The kit's one way to end a launch (``end_group``): SIGTERM to the launch's process group,
SIGKILL after the grace, and nothing of the group left running, for the kit's own child
(``ManagedProcess.stop``) and for one an earlier, killed controller left (``stop_leftovers``)."""

from __future__ import annotations

import sys
import time

import pytest

from pocforge.frameworks.launch_plan import NodeLaunch
from pocforge.frameworks.process import ManagedProcess, group_members, start_ticks, stop_leftovers

pytestmark = pytest.mark.process

# a leader that starts a grandchild (its own group's member) and then ignores SIGTERM or not
SCRIPT = """
import signal, subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
if sys.argv[1] == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("READY".lower(), flush=True)  # not the word itself: the log starts with the command
time.sleep(600)
"""


def launch(kind: str) -> NodeLaunch:
    return NodeLaunch(
        "serving", "vllm", 0, "127.0.0.1", "server", [sys.executable, "-c", SCRIPT, kind]
    )


def started(tmp_path, kind: str) -> ManagedProcess:
    process = ManagedProcess(launch(kind), tmp_path / "server.log").start()
    deadline = time.monotonic() + 30
    while "\nready\n" not in (tmp_path / "server.log").read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(group_members(process.pid)) == 2
    return process


@pytest.mark.parametrize("kind", ["polite", "stubborn"])
def test_stop_ends_the_whole_group_after_the_grace_at_most(tmp_path, kind):
    process = started(tmp_path, kind)
    begun = time.monotonic()
    code = process.stop(grace_s=1.0)
    assert group_members(process.pid) == []
    assert code == (-15 if kind == "polite" else -9)
    assert time.monotonic() - begun < 11  # the grace, and the kernel's teardown
    assert not process.pid_file.exists()


@pytest.mark.parametrize("kind", ["polite", "stubborn"])
def test_a_launch_left_by_a_killed_controller_is_stopped_from_its_pid_file(tmp_path, kind):
    process = started(tmp_path, kind)
    pid = process.pid
    assert start_ticks(pid) is not None and process.pid_file.exists()
    said = stop_leftovers(tmp_path, grace_s=1.0)  # as the next attempt does
    assert said == [f"{sys.executable} (pid {pid}) left by an earlier attempt, stopped"]
    assert group_members(pid) == []
    assert not process.pid_file.exists()
    process.proc.wait(timeout=10)  # reaped here only because this test started it


def test_a_pid_file_whose_pid_is_now_another_process_signals_nothing(tmp_path):
    process = started(tmp_path, "polite")
    record = process.pid_file.read_text().replace('"start_ticks": ', '"start_ticks": 1')
    process.pid_file.write_text(record)  # another start time: the pid was given to another
    assert stop_leftovers(tmp_path, grace_s=1.0) == []
    assert len(group_members(process.pid)) == 2
    process.stop(grace_s=1.0)
