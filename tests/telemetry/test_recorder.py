"""The one telemetry engine: the recorder (standard library only) run for real, in this
process as the runner runs it and as a node's own ``python3 -I`` runs it, reading this
machine's host and stand-in vendor tools that print real captures (tests/data/telemetry/,
sources in tests/data/README.md); what it wrote read back as the kit's series."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from pocforge.telemetry.host import parse_meminfo
from pocforge.telemetry.parsers import NVIDIA_SMI_ARGS
from pocforge.telemetry.reader import read_raw
from pocforge.telemetry.recorder import Recorder, json_documents
from pocforge.telemetry.series import window
from pocforge.telemetry.sources import AMD_SMI_CATEGORIES, recorder_plan, recorder_script
from tests.telemetry.captures import h100_noheader_lines, read, replaying, stand_in

NODE_PYTHON = shutil.which("python3") or sys.executable  # what Ansible runs on a node
NOWHERE = "http://127.0.0.1:9/metrics"  # no exporter answers there


def plan(tmp_path: Path, interval_s: float, **more) -> dict:
    """The kit's plan, kept to this test's tools (``tool_dirs``) and without exporters."""
    more.setdefault("tool_dirs", [])
    return recorder_plan(interval_s, str(tmp_path / "raw.jsonl"), amd_exporter_url=NOWHERE,
                         dcgm_exporter_url=NOWHERE, powercap=str(tmp_path / "no-powercap"),
                         **more)  # fmt: skip


# --- the plan ----------------------------------------------------------------------------------


def test_the_plan_tries_each_vendors_sources_in_order():
    amd, nvidia = recorder_plan(1.0, "/opt/pocforge/run/telemetry.serve.raw.jsonl")["chains"]
    assert [s["name"] for s in amd] == ["amd-smi", "amd-metrics-exporter", "rocm-smi"]
    assert [a["detail"] for a in amd[0]["argvs"]] == list(AMD_SMI_CATEGORIES)  # one each
    assert amd[0]["argvs"][0]["args"] == ["metric", "--power", "--json", "--watch", "1"]
    assert amd[0]["framing"] == "json"  # a stream of documents, not of lines
    assert [s["name"] for s in nvidia] == ["nvidia-smi", "dcgm-exporter"]
    assert nvidia[0]["argvs"][0]["args"] == [*NVIDIA_SMI_ARGS, "-lms", "1000"]
    assert nvidia[0]["env"] == {"TZ": "UTC"}
    assert recorder_plan(0.25, "x")["chains"][0][0]["argvs"][0]["args"][-1] == "1"  # whole s


def test_choose_takes_each_vendors_first_source_the_machine_has(tmp_path):
    bin_dir = tmp_path / "bin"
    for tool in ("amd-smi", "rocm-smi", "nvidia-smi"):
        stand_in(bin_dir, tool, "", NODE_PYTHON)
    chosen, not_used = Recorder(plan(tmp_path, 1.0, tool_dirs=[str(bin_dir)])).choose()
    assert [(s["name"], s["path"]) for s in chosen] == [
        ("amd-smi", str(bin_dir / "amd-smi")),
        ("nvidia-smi", str(bin_dir / "nvidia-smi")),
    ]
    (bin_dir / "amd-smi").unlink()
    (bin_dir / "nvidia-smi").unlink()
    chosen, not_used = Recorder(plan(tmp_path, 0.5, tool_dirs=[str(bin_dir)])).choose()
    assert [s["name"] for s in chosen] == ["rocm-smi"]
    assert not_used == [f"NVIDIA: no nvidia-smi, no dcgm-exporter at {NOWHERE}"]
    chosen, not_used = Recorder(plan(tmp_path, 1.0)).choose()
    assert chosen == [] or shutil.which("amd-smi") or shutil.which("nvidia-smi")
    assert not_used[0] == f"AMD: no amd-smi, no amd-metrics-exporter at {NOWHERE}, no rocm-smi"


def test_json_documents_waits_for_the_rest_of_a_document():
    text = json.dumps([{"gpu": 0}], indent=4)
    docs, rest, skipped = json_documents("banner\n" + text[:10])
    assert (docs, skipped) == ([], ["banner"]) and rest == text[:10]
    docs, rest, _ = json_documents(rest + text[10:] + "\n[1]")
    assert [json.loads(d) for d in docs] == [[{"gpu": 0}], [1]] and rest == ""


# --- in this process, as the runner records ------------------------------------------------


def test_the_host_recorded_for_real(tmp_path):
    """Two seconds of this machine at 0.25 s: a record a reading, in time order at the
    interval, CPU busy share in [0, 100] that sees a thread spinning, memory as /proc says;
    no RAPL (an empty powercap), so no package samples and no energy, said so."""
    stop = threading.Event()

    def spin() -> None:  # one core busy for the second half
        time.sleep(1.0)
        while not stop.is_set():
            pass

    spinner = threading.Thread(target=spin)
    recorder = Recorder({**plan(tmp_path, 0.25), "host": "this-host"}).start()
    try:
        spinner.start()
        time.sleep(2.0)
        stop.set()
        spinner.join()
        assert recorder.wait_until(time.time(), 2.0)
    finally:
        recorder.stop()
    series = read_raw(recorder.path)

    assert series.meta.host == "this-host" and series.meta.interval_s == 0.25
    assert [s.name for s in series.meta.sources] == ["host"]
    assert "no RAPL" in series.meta.sources[0].detail
    assert "no-powercap" in series.meta.sources[0].detail
    assert series.unreadable == 0 and series.end is not None
    samples = series.host
    assert 7 <= len(samples) <= 11
    gaps = [b.timestamp_s - a.timestamp_s for a, b in zip(samples, samples[1:], strict=False)]
    assert all(0.15 < g < 0.6 for g in gaps), gaps
    assert samples[0].cpu_util_pct is None  # needs two readings
    utils = [s.cpu_util_pct for s in samples[1:]]
    assert all(0.0 <= u <= 100.0 for u in utils)
    cpus = samples[0].cpu_count
    assert cpus >= 1 and max(utils[-3:]) >= 0.5 * 100 / cpus  # the spinning core shows
    used, total = parse_meminfo(Path("/proc/meminfo").read_text())
    assert samples[-1].mem_total_bytes == total
    assert abs(samples[-1].mem_used_bytes - used) < 0.2 * total
    assert series.gpu == [] and series.packages == []
    (cost,) = series.end.cost
    assert (cost.source, cost.samples) == ("host", len(samples)) and cost.cpu_s < 0.2
    win = window(series.gpu, series.packages, samples[1].timestamp_s, samples[-2].timestamp_s,
                 interval_s=0.25, output_tokens=100, gpu_count=1)  # fmt: skip
    assert win.energy is None and win.devices is None
    assert "no power source" in win.problem


@pytest.mark.process
def test_looping_tools_are_read_as_they_print(tmp_path):
    """nvidia-smi replaying the 4x H100 rows and amd-smi's watch mode printing the
    CHANGELOG document (a banner, then one indented document at a time): each nvidia-smi
    line is a record, each amd-smi document one record however many lines it spans; both
    tools are stopped and their CPU counted."""
    doc = json.dumps(json.loads(read("amd_smi_metric_power_json_changelog.json")), indent=4)
    watch = "'CTRL' + 'C' to stop watching output:\n" + doc + "\n"
    bin_dir = tmp_path / "bin"
    stand_in(bin_dir, "nvidia-smi", replaying(h100_noheader_lines()), NODE_PYTHON)
    stand_in(bin_dir, "amd-smi", replaying([watch, doc + "\n"]), NODE_PYTHON)
    recorder = Recorder(plan(tmp_path, 0.1, tool_dirs=[str(bin_dir)])).start()
    try:  # seven tools start at once: wait for what they print, not for a time
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            text = recorder.path.read_text()
            if text.count('"source":"nvidia-smi"') >= 8 and text.count('"detail":"power"') >= 3:
                break
            time.sleep(0.1)
    finally:
        recorder.stop()
    series = read_raw(recorder.path, "node")
    nvidia = [s for s in series.gpu if s.source == "nvidia-smi"]
    assert len(nvidia) >= 8 and {s.gpu for s in nvidia} == {0, 1, 2, 3}
    amd = [s for s in series.gpu if s.source == "amd-smi"]
    categories = len(AMD_SMI_CATEGORIES)  # the stand-in prints the power document for each
    assert len(amd) >= 2 * categories and {s.power_w for s in amd} == {10.0}
    assert series.problems == [] and series.unreadable == 0  # the banner is expected
    assert {s.host for s in series.gpu} == {"node"}
    costs = {c.source: c for c in series.end.cost}
    assert costs["nvidia-smi"].tool_cpu_s is not None and costs["nvidia-smi"].samples >= 8
    assert costs["amd-smi power"].samples >= 2
    assert [s.command[0] for s in series.meta.sources[1:]] == [str(bin_dir / "amd-smi")] * (
        categories
    ) + [str(bin_dir / "nvidia-smi")]
    for key in ("nvidia-smi", "amd-smi power"):
        assert recorder._procs[key].poll() is not None  # stopped


@pytest.mark.process
def test_exporter_scrape_and_a_failing_command(tmp_path):
    """dcgm-exporter's README sample served on a local port is scraped once an interval;
    rocm-smi exiting non-zero becomes problem lines, and recording goes on."""
    body = read("dcgm_exporter_readme_sample.prom").encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    bin_dir = stand_in(tmp_path / "bin", "rocm-smi", "raise SystemExit(3)\n", NODE_PYTHON)
    the_plan = plan(tmp_path, 0.2, tool_dirs=[str(bin_dir)])
    the_plan["chains"][1][1]["url"] = f"http://127.0.0.1:{server.server_port}/metrics"
    recorder = Recorder(the_plan).start()
    try:
        time.sleep(0.7)
    finally:
        recorder.stop()
        server.shutdown()
    series = read_raw(recorder.path, "n")
    assert len(series.gpu) >= 3 and series.gpu[0].sm_clock_mhz == 139
    assert series.gpu[0].temp_mem_c is None  # DCGM's blank
    assert series.problems and all(p.source == "rocm-smi" for p in series.problems)
    assert "exit 3" in series.problems[0].message


# --- on a node -------------------------------------------------------------------------------


@pytest.mark.process
def test_the_recorder_runs_on_the_nodes_python_alone_and_stops_on_sigterm(tmp_path):
    """Copied and run as the workload role runs it (``python3 -I``: no kit on the path):
    the host read every interval, the first source of the NVIDIA chain the node has, the
    AMD chain's absence said; SIGTERM ends it with its cost, and the controller's series
    holds the tool's samples."""
    shutil.copy(recorder_script(), tmp_path / "recorder.py")
    bin_dir = stand_in(tmp_path / "bin", "nvidia-smi", replaying(h100_noheader_lines()),
                       NODE_PYTHON)  # fmt: skip
    the_plan = plan(tmp_path, 0.2)
    (tmp_path / "plan.json").write_text(json.dumps(the_plan))
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    proc = subprocess.Popen([NODE_PYTHON, "-I", "recorder.py", "plan.json"], cwd=tmp_path, env=env)
    try:
        out = Path(the_plan["out"])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            text = out.read_text() if out.exists() else ""
            if text.count('"kind":"host"') >= 5 and text.count('"source":"nvidia-smi"') >= 8:
                break
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    series = read_raw(out, "node0")
    assert [s.name for s in series.meta.sources] == ["host", "nvidia-smi"]
    assert series.meta.sources[1].command[0] == str(bin_dir / "nvidia-smi")
    (amd,) = [n for n in series.meta.not_used if n.startswith("AMD")]
    assert "no amd-smi" in amd and "no rocm-smi" in amd
    assert len(series.host) >= 5 and len(series.gpu) >= 8
    assert {s.gpu for s in series.gpu} == {0, 1, 2, 3}
    assert series.end is not None and series.unreadable == 0
    assert any(c.source == "nvidia-smi" and c.tool_cpu_s is not None for c in series.end.cost)


def test_rapl_packages_are_recorded_raw_and_read_as_energy(tmp_path):
    """A powercap tree of two packages (and a psys zone, not a package): the meta names
    them, the first host record carries each counter's range, and the series has energy
    per package from the counters as they were."""
    from tests.telemetry.test_reader import powercap_tree

    root = powercap_tree(tmp_path / "powercap", {0: 1000, 1: 2000})
    recorder = Recorder({**plan(tmp_path, 0.1), "powercap": str(root)}).start()
    try:
        assert recorder.wait_until(time.time(), 5.0)
        (root / "intel-rapl:1" / "energy_uj").write_text("3000002000\n")
        assert recorder.wait_until(time.time() + 0.05, 5.0)
    finally:
        recorder.stop()
    series = read_raw(recorder.path, "cpu-node")
    assert series.meta.sources[0].detail.endswith("RAPL package energy (2 packages)")
    assert {p.package for p in series.packages} == {0, 1}
    last = [p for p in series.packages if p.package == 1][-1]
    assert last.energy_j == pytest.approx(3000.0)  # 3e9 µJ since the first reading
