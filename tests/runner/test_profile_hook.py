"""The profiled point's files are moved into the run once the profiler has written them
all: vLLM's workers write their trace, then sum it into their table, which under load
comes seconds after the trace's size holds still (CI: the run kept the trace, not the table)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from pocforge.bench.summary import PointSummary
from pocforge.runner import profile
from pocforge.runner.profile import ProfileHook

TRACE = "rank0.host_1234.1764676000000.pt.trace.json.gz"
TABLE = "rank0.profiler_out.txt"


class SlowTableWorker(ProfileHook):
    """The server's answer to ``/stop_profile`` as vLLM's worker behaves after it: the
    trace at once, the table ``table_after_s`` later (or never)."""

    table_after_s: float | None = 2.5
    fails_in_log: bool = False  # vLLM's worker when torch raised while it summed the trace

    def _post(self, path: str, body: dict | None = None, timeout_s: float = 0) -> None:
        if path != "/stop_profile":
            return

        def write() -> None:
            (self.trace_dir / TRACE).write_bytes(b"\x1f\x8b trace")
            if self.fails_in_log:
                with self.logs[0].open("a") as log:
                    log.write(f"WARNING {profile.STOP_FAILED}: 'utf-8' codec can't decode\n")
            elif self.table_after_s is not None:
                time.sleep(self.table_after_s)
                (self.trace_dir / TABLE).write_text("Name  Self CPU %\n")

        threading.Thread(target=write, daemon=True).start()


def point() -> PointSummary:
    return PointSummary(
        id="c2", mode="concurrency", value=2, status="ok", records_file="x", repeats=[]
    )


def test_the_table_written_after_the_trace_settled_is_kept(tmp_path):
    said: list[str] = []
    hook = SlowTableWorker(
        "http://127.0.0.1:1", "vllm", ["c2"], tmp_path / "traces", tmp_path / "run", said.append
    )
    hook.trace_dir.mkdir()
    hook.after_profile(point(), False)
    kept = sorted(p.name for p in (tmp_path / "run" / "profile-c2").iterdir())
    assert kept == sorted([TABLE, TRACE]), said


def test_a_table_that_never_comes_is_named_and_the_trace_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(profile, "SETTLE_S", 3.0)
    said: list[str] = []
    hook = SlowTableWorker(
        "http://127.0.0.1:1", "vllm", ["c2"], tmp_path / "traces", tmp_path / "run", said.append
    )
    hook.table_after_s = None
    hook.trace_dir.mkdir()
    hook.after_profile(point(), False)
    assert [p.name for p in (tmp_path / "run" / "profile-c2").iterdir()] == [TRACE]
    assert any("no table after 3 s from ['rank0']" in line for line in said), said


def test_sglang_writes_traces_only_and_is_not_kept_waiting(tmp_path):
    hook = SlowTableWorker("http://127.0.0.1:1", "sglang", ["c2"], tmp_path / "t", tmp_path / "r")
    hook.table_after_s = None
    hook.trace_dir.mkdir()
    started = time.monotonic()
    hook.after_profile(point(), False)
    assert time.monotonic() - started < profile.SETTLE_S / 4
    assert [p.name for p in (tmp_path / "r" / "profile-c2").iterdir()] == [TRACE]


def test_a_profiler_that_logged_its_failure_is_not_waited_for(tmp_path):
    said: list[str] = []
    log = tmp_path / "server.log"
    log.write_text(f"WARNING {profile.STOP_FAILED}: an earlier point's, not this one's\n")
    hook = SlowTableWorker(
        "http://127.0.0.1:1", "vllm", ["c2"], tmp_path / "t", tmp_path / "r", said.append, [log]
    )
    hook.fails_in_log = True
    hook.before_profile(point())
    started = time.monotonic()
    hook.after_profile(point(), False)
    assert time.monotonic() - started < profile.SETTLE_S / 4
    assert [p.name for p in (tmp_path / "r" / "profile-c2").iterdir()] == [TRACE]
    (line,) = [line for line in said if "no table" in line]
    assert "no table from ['rank0']: WARNING Failed to stop profiler: 'utf-8'" in line, said
    assert "profile: c2: the dashboard sums their tables from their traces" in said


def test_a_failure_logged_mid_point_by_a_profiler_that_stopped_itself_counts(tmp_path):
    """vLLM's profiler stops itself after its first engine steps (max_iterations): its
    failure is in the log before the kit's stop call, and still ends the wait."""
    said: list[str] = []
    log = tmp_path / "server.log"
    log.write_text("")
    hook = SlowTableWorker(
        "http://127.0.0.1:1", "vllm", ["c2"], tmp_path / "t", tmp_path / "r", said.append, [log]
    )
    hook.table_after_s = None
    hook.before_profile(point())
    (hook.trace_dir / TRACE).write_bytes(b"\x1f\x8b trace")
    with log.open("a") as handle:  # the point still running
        handle.write(f"WARNING {profile.STOP_FAILED}: 'utf-8' codec can't decode\n")
    started = time.monotonic()
    hook.after_profile(point(), False)
    assert time.monotonic() - started < profile.SETTLE_S / 4
    assert any("no table from ['rank0']: WARNING Failed to stop" in line for line in said), said


def test_a_failure_logged_before_the_point_does_not_cut_the_wait(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(f"WARNING {profile.STOP_FAILED}: an earlier point's\n")
    hook = SlowTableWorker(
        "http://127.0.0.1:1", "vllm", ["c2"], tmp_path / "t", tmp_path / "r", logs=[log]
    )
    hook.before_profile(point())
    hook.after_profile(point(), False)
    assert sorted(p.name for p in (tmp_path / "r" / "profile-c2").iterdir()) == sorted(
        [TABLE, TRACE]
    )


class NsysServer(ProfileHook):
    """A server under ``nsys --capture-range-end=repeat`` after ``/stop_profile``: the raw
    stream first, turned into the range's report 2 s later (as nsys does once the range
    ends); the start request's body is kept."""

    def _post(self, path: str, body: dict | None = None, timeout_s: float = 0) -> None:
        self.bodies.append((path, body))
        if path != "/stop_profile":
            return

        def write() -> None:
            raw = self.trace_dir / "nsys-h200-01-77.1.qdstrm"
            raw.write_bytes(b"stream")
            time.sleep(2.0)
            (self.trace_dir / "nsys-h200-01-77.1.nsys-rep").write_bytes(b"report")
            raw.unlink()

        threading.Thread(target=write, daemon=True).start()


def gpu_tool_hook(tmp_path, framework: str, tool: str, said: list[str]) -> NsysServer:
    hook = NsysServer(
        "http://127.0.0.1:1", framework, ["c2"], tmp_path / "traces", tmp_path / "run",
        said.append, tool=tool,
    )  # fmt: skip
    hook.bodies = []  # (path, body) of each request the hook sent
    return hook


@pytest.mark.process
def test_an_nsys_report_is_waited_for_kept_and_summed(tmp_path, monkeypatch):
    """The report is moved once nsys has made it, then ``nsys stats`` (from PATH: a
    stand-in that records its call, nsys does not run here) sums it beside it."""
    calls = tmp_path / "calls"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nsys").write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    (bin_dir / "nsys").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    said: list[str] = []
    hook = gpu_tool_hook(tmp_path, "sglang", "nsys", said)
    hook.before_profile(point())
    hook.after_profile(point(), False)
    folder = tmp_path / "run" / "profile-c2"
    assert [p.name for p in folder.iterdir()] == ["nsys-h200-01-77.1.nsys-rep"], said
    assert calls.read_text().split()[:3] == ["stats", "--report", "cuda_gpu_kern_sum"]
    assert hook.bodies[0] == (
        "/start_profile",
        {"output_dir": str(hook.trace_dir), "activities": ["CUDA_PROFILER"]},
    )
    assert "profile: c2 under nsys" in said


def test_rocprofv3_is_not_waited_for_after_its_point(tmp_path):
    """rocprofv3 writes at the server's exit: the point says where its files will be."""
    said: list[str] = []
    hook = gpu_tool_hook(tmp_path, "vllm", "rocprofv3", said)
    hook.trace_dir.mkdir()
    started = time.monotonic()
    hook.after_profile(point(), False)
    assert time.monotonic() - started < 1.0
    assert said == [
        "profile: c2: rocprofv3 writes its files when the server stops; they are kept in "
        f"{tmp_path / 'run' / 'profile-c2'} then"
    ]


def test_rocprofv3s_files_are_kept_in_its_point_when_the_server_stops(tmp_path):
    from pocforge.runner.local import keep_rocprof, traces
    from pocforge.spec import load_poc

    spec = load_poc("deepseek-v3-fp8-mi355x-sglang")  # profiles reasoning r4 with rocprofv3
    written = traces(tmp_path) / "rocprofv3" / "node0-4242"
    written.mkdir(parents=True)
    (written / "node0-4242_kernel_stats.csv").write_text("Name,Calls\n")
    said: list[str] = []
    keep_rocprof(spec, tmp_path, said.append)
    kept = tmp_path / "reasoning" / "profile-r4" / "rocprofv3" / "node0-4242"
    assert (kept / "node0-4242_kernel_stats.csv").is_file()
    assert not (traces(tmp_path) / "rocprofv3").exists()
    assert said == [f"profile: r4: rocprofv3 wrote 1 files at the server's exit, in {kept.parent}"]
    keep_rocprof(load_poc("demo"), tmp_path, said.append)  # torch's profiler: nothing to do
    assert len(said) == 1


@pytest.mark.process
def test_an_interrupted_point_does_not_wait_out_a_server_that_never_answers(monkeypatch):
    """A node lost mid-pass: h1's API takes ``/stop_profile`` and never answers (its DP
    engine on the lost node cannot stop). An interrupted pass waits INTERRUPTED_STOP_S for
    it, not the full timeout, and says the profiler did not stop; a finished one would wait
    the full STOP_S."""
    import socket

    monkeypatch.setattr(profile, "INTERRUPTED_STOP_S", 1)
    with socket.create_server(("127.0.0.1", 0)) as server:  # listens, never answers
        said: list[str] = []
        url = f"http://127.0.0.1:{server.getsockname()[1]}"
        hook = ProfileHook(url, "vllm", ["c2"], Path("unused"), Path("unused"), said.append)
        began = time.monotonic()
        assert hook._stop(point(), interrupted=True) is True
        assert time.monotonic() - began < profile.STOP_S / 10
        assert said == [
            f"profile: c2: the profiler did not stop cleanly: {url}/stop_profile: timed out"
        ]
