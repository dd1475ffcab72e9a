"""A profiled point's files on a cluster node: ``profilers.py settle`` (run on the node by
profile.yml, with the node's ``python3 -I``: standard library only) waits until they are
whole and moves them into the point's folder; after collect, :func:`adopt_profiles` links
each node's folders into the run, where the dashboard finds them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pocforge.frameworks import profilers
from pocforge.frameworks.base import PROFILE_DIR
from pocforge.frameworks.profilers import ROCPROF_SUBDIR
from pocforge.results.store import RunStore
from pocforge.runner.node_profile import NODE_PROFILES, adopt_profiles, node_folder
from pocforge.spec import load_poc

pytestmark = pytest.mark.process
TRACE = "dp1_pp0_tp0.1796163159526453604.pt.trace.json.gz"
TABLE = "dp1_pp0_tp0.profiler_out.txt"


def settle(src: Path, dest: Path, *extra: str) -> tuple[dict, float]:
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-I", profilers.__file__, "settle", str(src), str(dest), *extra],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), time.monotonic() - began


def test_the_table_written_after_the_trace_is_waited_for_and_both_moved(tmp_path):
    src, dest = tmp_path / "incoming", tmp_path / "profile-c2"
    src.mkdir()
    (src / TRACE).write_bytes(b"\x1f\x8b trace")

    def table_later() -> None:
        time.sleep(2.5)
        (src / TABLE).write_text("Name  Self CPU %\n")

    threading.Thread(target=table_later, daemon=True).start()
    said, _ = settle(src, dest, "--framework", "vllm", "--deadline", "60")
    assert said == {"moved": 2, "missing_tables": [], "problems": [], "failed": [], "set_aside": 0}
    assert sorted(p.name for p in dest.iterdir()) == sorted([TABLE, TRACE])
    assert not list(src.iterdir())  # out of the way of the next point's


def test_a_table_that_never_comes_is_named_after_the_timeout(tmp_path):
    src, dest = tmp_path / "incoming", tmp_path / "profile-c2"
    src.mkdir()
    (src / TRACE).write_bytes(b"\x1f\x8b trace")
    said, took = settle(src, dest, "--framework", "vllm", "--deadline", "3")
    assert (
        said
        == {
            "moved": 1,
            "missing_tables": ["dp1_pp0_tp0"],
            "problems": [],
            "failed": [],
            "set_aside": 0,
        }
        and took >= 3
    )


def test_a_failure_the_workers_log_ends_the_wait_once_per_point(tmp_path):
    """vLLM's worker logged "Failed to stop profiler" (no table will come): the settle ends
    at once naming the line, and keeps how far it read, so the next point's settle does not
    take that line for its own and waits out its timeout; a log older than the point's start
    (an earlier server's) is not read."""
    src, logs = tmp_path / "incoming", tmp_path / "logs"
    src.mkdir()
    logs.mkdir()
    old = logs / "poc-vllm-rank1-20261203T100000Z.log"
    old.write_text(f"(Worker pid=9) WARNING {profilers.STOP_FAILED}: an old server's\n")
    os.utime(old, (1_000_000, 1_000_000))
    log = logs / "poc-vllm-rank1-20261203T110000Z.log"
    line = f"(Worker pid=38) WARNING 12-03 16:01:38 [wrapper.py:100] {profilers.STOP_FAILED}: 'utf-8' codec can't decode byte 0x89"  # noqa: E501
    log.write_text(f"INFO serving\n{line}\nINFO more requests\n")
    since = str(int(time.time()) - 60)
    (src / TRACE).write_bytes(b"\x1f\x8b trace")
    args = ("--framework", "vllm", "--deadline", "60", "--logs", str(logs), "--since", since)
    said, took = settle(src, tmp_path / "profile-c2", *args)
    assert said == {
        "moved": 1,
        "missing_tables": ["dp1_pp0_tp0"],
        "problems": [],
        "failed": [line],
        "set_aside": 0,
    }
    assert took < 30
    (src / TRACE).write_bytes(b"\x1f\x8b the next point's trace")
    args = (*args[:3], "3", *args[4:])
    said, took = settle(src, tmp_path / "profile-c4", *args)
    assert said["failed"] == [] and said["missing_tables"] == ["dp1_pp0_tp0"] and took >= 3


def test_an_earlier_attempts_files_are_set_aside_not_mixed_into_the_point(tmp_path):
    """A resumed run on a node that kept its run folder: the point's folder the lost attempt
    filled, and the trace its engine wrote after that attempt's settle (older than this
    point's start), go aside together; the point's folder holds this attempt's files only,
    and how far the logs were read is kept beside the profiler's folder, not in the logs."""
    profiles = tmp_path / "profiles"
    src, dest, logs = profiles / "incoming", profiles / "chat" / "profile-c2", tmp_path / "logs"
    src.mkdir(parents=True)
    dest.mkdir(parents=True)
    logs.mkdir()
    (dest / TRACE).write_bytes(b"\x1f\x8b attempt 1, settled")
    late = src / "dp0_pp0_tp0.1.pt.trace.json.gz"
    late.write_bytes(b"\x1f\x8b attempt 1, written after its settle")
    os.utime(late, (time.time() - 600, time.time() - 600))
    (src / TRACE).write_bytes(b"\x1f\x8b attempt 2")
    (src / TABLE).write_text("table\n")
    (logs / "poc-vllm-rank1-20261204T014113Z.log").write_text("INFO serving\n")
    since = str(int(time.time()) - 60)
    said, _ = settle(src, dest, "--framework", "vllm", "--logs", str(logs), "--since", since)
    assert said["moved"] == 2 and said["set_aside"] == 2 and said["missing_tables"] == []
    assert sorted(p.name for p in dest.iterdir()) == sorted([TRACE, TABLE])
    assert (dest / TRACE).read_bytes() == b"\x1f\x8b attempt 2"
    (aside,) = [p for p in dest.parent.iterdir() if p != dest]
    assert aside.name.startswith(".profile-c2.before-")  # not a point's folder to the run
    assert sorted(p.read_bytes() for p in aside.iterdir()) == sorted(
        [b"\x1f\x8b attempt 1, settled", b"\x1f\x8b attempt 1, written after its settle"]
    )
    assert list(logs.iterdir()) == [logs / "poc-vllm-rank1-20261204T014113Z.log"]
    assert (profiles / profilers.LOGS_SEEN).is_file()


@pytest.mark.parametrize("launches", [[], [{"role": "router"}]], ids=["none", "a router"])
def test_a_node_with_no_engine_is_not_kept_waiting(tmp_path, launches):
    """Its plan (serve.launches.json) holds no engine whose profiler writes there: nothing
    is waited for (a node with an engine beside its router waits, below)."""
    plan = tmp_path / "serve.launches.json"
    plan.write_text(json.dumps({"poc": "p", "node_rank": 1, "launches": launches}))
    args = ("--framework", "vllm", "--deadline", "60", "--plan", str(plan))
    said, took = settle(tmp_path / "incoming", tmp_path / "dest", *args)
    assert said == {"moved": 0, "missing_tables": [], "problems": [], "failed": [], "set_aside": 0}
    assert took < 10


def test_a_node_with_an_engine_beside_its_router_waits_for_its_files(tmp_path):
    plan = tmp_path / "serve.launches.json"
    plan.write_text(json.dumps({"launches": [{"role": "router"}, {"role": "decode"}]}))
    (tmp_path / "incoming").mkdir()
    (tmp_path / "incoming" / TRACE).write_bytes(b"\x1f\x8b trace")
    (tmp_path / "incoming" / TABLE).write_text("Name  Self CPU %\n")
    args = ("--framework", "vllm", "--deadline", "60", "--plan", str(plan))
    said, _ = settle(tmp_path / "incoming", tmp_path / "dest", *args)
    assert said["moved"] == 2


def test_each_nodes_profiled_points_are_linked_into_the_run(tmp_path):
    store = RunStore(tmp_path / "results")
    run = store.create(load_poc("demo"))
    collected = run.path / "cluster" / "collected"
    for host, worker in (("h1", "rank0"), ("h2", "dp1_pp0_tp0")):
        folder = collected / host / node_folder("chat", "c2").lstrip("/")
        folder.mkdir(parents=True)
        (folder / f"{worker}.1.pt.trace.json.gz").write_bytes(b"trace of " + host.encode())
        (folder / f"{worker}.profiler_out.txt").write_text(f"table of {host}\n")
    (collected / "h1" / NODE_PROFILES.lstrip("/") / "other").mkdir(parents=True)  # no workload
    said: list[str] = []
    adopt_profiles(run, collected, ["chat"], said.append)
    point = run.path / "serving" / "chat" / "profile-c2"
    assert sorted(p.relative_to(point).as_posix() for p in point.rglob("*") if p.is_file()) == [
        "h1/rank0.1.pt.trace.json.gz",
        "h1/rank0.profiler_out.txt",
        "h2/dp1_pp0_tp0.1.pt.trace.json.gz",
        "h2/dp1_pp0_tp0.profiler_out.txt",
    ]
    assert (point / "h2" / "dp1_pp0_tp0.profiler_out.txt").read_text() == "table of h2\n"
    assert said == ["profile: chat: 4 files from the nodes in serving/chat/"]
    recorded = set(run.manifest.files)
    assert "serving/chat/profile-c2/h1/rank0.profiler_out.txt" in recorded
    adopt_profiles(run, collected, ["chat"], said.append)  # a second call adds nothing twice
    assert len([p for p in point.rglob("*") if p.is_file()]) == 4


def test_rocprofv3s_files_written_at_exit_are_its_points(tmp_path):
    """rocprofv3 writes into ``PROFILE_DIR/rocprofv3/<host>-<pid>/`` as the servers exit
    (collect.yml stops them first): linked into its one profiled point's folder."""
    store = RunStore(tmp_path / "results")
    run = store.create(load_poc("demo"))
    collected = run.path / "cluster" / "collected"
    exited = collected / "h1" / PROFILE_DIR.lstrip("/") / ROCPROF_SUBDIR / "h1-4242"
    exited.mkdir(parents=True)
    (exited / "h1-4242_kernel_stats.csv").write_text("Name,Calls\n")
    said: list[str] = []
    adopt_profiles(run, collected, ["chat"], said.append, rocprof=("chat", "r4"))
    kept = run.path / "serving" / "chat" / "profile-r4" / "h1" / ROCPROF_SUBDIR
    assert (kept / "h1-4242" / "h1-4242_kernel_stats.csv").read_text() == "Name,Calls\n"
    assert said == ["profile: chat: 1 files from the nodes in serving/chat/"]
    adopt_profiles(run, collected, ["other"], said.append, rocprof=("chat", "r4"))
    assert len(said) == 1  # another workload takes none of them


def test_the_settle_step_waits_for_nsys_and_names_a_report_it_could_not_sum(tmp_path):
    """Under nsys the node waits for the range's report, moves it, and sums it with the
    nsys it is given (here one that fails: the line comes back, the report is kept)."""
    src, dest = tmp_path / "incoming", tmp_path / "point"
    src.mkdir()
    (src / "nsys-h1-9.1.nsys-rep").write_bytes(b"report")
    failing = tmp_path / "nsys"
    failing.write_text("#!/bin/sh\necho 'cannot open report' >&2\nexit 2\n")
    failing.chmod(0o755)
    moved, _ = settle(src, dest, "--framework", "vllm", "--tool", "nsys", "--nsys", str(failing))
    assert moved["moved"] == 1 and moved["missing_tables"] == []
    assert moved["problems"] == ["nsys-h1-9.1.nsys-rep: nsys stats exited 2: cannot open report"]
    assert (dest / "nsys-h1-9.1.nsys-rep").read_bytes() == b"report"
