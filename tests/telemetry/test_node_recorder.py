"""A cluster node's telemetry: the recorder (standard library only) run for real as the
nodes run it, its raw file turned into the kit's series on the controller with the parsers
tested on real captures (tests/data/telemetry/, sources in tests/data/README.md)."""

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

from pocforge.telemetry.node import recorder_plan, recorder_script, series_from_raw
from pocforge.telemetry.sampler import AMD_SMI_CATEGORIES, NVIDIA_SMI_ARGS
from pocforge.telemetry.series import Series
from tests.telemetry.captures import h100_noheader_lines, read

T = 1_764_590_400.0
NODE_PYTHON = shutil.which("python3") or sys.executable  # what Ansible runs on a node


def raw(kind: str, **fields) -> str:
    return json.dumps({"kind": kind, **fields}) + "\n"


def test_the_plan_tries_each_vendors_sources_in_the_samplers_order():
    plan = recorder_plan(1.0, "/opt/pocforge/run/telemetry.serve.raw.jsonl")
    amd, nvidia = plan["chains"]
    assert [s["name"] for s in amd] == ["amd-smi", "amd-metrics-exporter", "rocm-smi"]
    assert [a["detail"] for a in amd[0]["argvs"]] == list(AMD_SMI_CATEGORIES)  # one each
    assert amd[0]["argvs"][0]["args"] == ["metric", "--power", "--json", "--watch", "1"]
    assert [s["name"] for s in nvidia] == ["nvidia-smi", "dcgm-exporter"]
    assert nvidia[0]["argvs"][0]["args"] == [*NVIDIA_SMI_ARGS, "-lms", "1000"]
    assert recorder_plan(0.25, "x")["chains"][0][0]["argvs"][0]["args"][-1] == "1"  # whole s


def test_a_raw_file_of_real_captures_becomes_the_nodes_series(tmp_path):
    """nvidia-smi's looping rows (the 4x H100 capture), amd-smi's watch documents split
    over lines as it prints them (the CHANGELOG capture), the host's /proc lines and a RAPL
    counter that wraps; a line cut by a node that died is counted, not fatal."""
    amd_doc = json.dumps(json.loads(read("amd_smi_metric_power_json_changelog.json")), indent=4)
    lines = [
        raw("meta", host="ns-node", cpus=8, interval_s=1.0, started_s=T, not_used=["AMD: x"],
            sources=[{"name": "host", "detail": "/proc"}]),  # fmt: skip
        raw("host", t=T, stat="cpu  100 0 100 800 0 0 0 0 0 0",
            meminfo="MemTotal: 1000 kB\nMemAvailable: 250 kB",
            rapl={"0": 262_000_000}, rapl_max_uj={"0": 262_143_328_850}),  # fmt: skip
        *[raw("raw", source="nvidia-smi", detail="", t=T + 0.1, text=x) for x in h100_noheader_lines()],
        raw("raw", source="amd-smi", detail="power", t=T + 0.2, text="'CTRL' + 'C' to stop watching output:\n"),
        *[raw("raw", source="amd-smi", detail="power", t=T + 0.3, text=x + "\n") for x in amd_doc.splitlines()],
        raw("host", t=T + 2, stat="cpu  200 0 200 1000 0 0 0 0 0 0",
            meminfo="MemTotal: 1000 kB\nMemAvailable: 500 kB", rapl={"0": 100_000_000}),  # fmt: skip
        raw("problem", source="nvidia-smi", t=T + 2.5, message="nvidia-smi exited with 9"),
        raw("end", stopped_s=T + 3, wall_s=3.0, cpu_s=0.02, tool_cpu_s={"nvidia-smi": 0.01}),
        '{"kind": "raw", "source": "nvidia-smi", "t": 1',
    ]  # fmt: skip
    path = tmp_path / "telemetry.serve.raw.jsonl"
    path.write_text("".join(lines))
    series = series_from_raw(path, "node1")
    assert series.meta.host == "node1" and series.meta.not_used == ["AMD: x"]
    nvidia = [s for s in series.gpu if s.source == "nvidia-smi"]
    assert [s.power_w for s in nvidia] == [70.89, 71.71, 70.78, 72.17]
    (amd,) = [s for s in series.gpu if s.source == "amd-smi"]
    assert (amd.power_w, amd.timestamp_s) == (10.0, T + 0.3)  # stamped by its last line
    assert {s.host for s in series.gpu} == {"node1"}
    first, second = series.host
    assert (first.cpu_util_pct, second.cpu_util_pct) == (None, pytest.approx(100 * 200 / 400))
    assert second.mem_used_bytes == 500 * 1024 and second.cpu_count == 8
    p0, p1 = series.packages
    assert p1.energy_j == pytest.approx((262_143_328_850 + 1 - 262_000_000 + 100_000_000) / 1e6)
    assert p1.power_w == pytest.approx(p1.energy_j / 2)
    assert [p.message for p in series.problems] == ["nvidia-smi exited with 9"]
    assert series.unreadable == 1
    assert series.end.cost[0].source == "recorder" and series.end.cost[1].tool_cpu_s == 0.01
    written = Series.read(series.write(tmp_path / "node1.jsonl"))  # what the run keeps
    assert (len(written.gpu), len(written.host), len(written.packages)) == (5, 2, 2)
    assert written.end is not None and written.unreadable == 0


def tool_on_path(folder: Path, name: str, lines: list[str]) -> None:
    """A looping tool on the node's PATH that prints real rows, then one per 0.1 s, as
    ``nvidia-smi -lms`` prints: the instrument the recorder reads (no GPU here)."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / name
    script.write_text(
        f"#!{NODE_PYTHON}\n"
        "import sys, time\n"
        f"lines = {lines!r}\n"
        "sys.stdout.write(''.join(lines)); sys.stdout.flush()\n"
        "while True:\n"
        "    time.sleep(0.1); sys.stdout.write(lines[0]); sys.stdout.flush()\n"
    )
    script.chmod(0o755)


@pytest.mark.process
def test_the_recorder_runs_on_the_nodes_python_alone_and_stops_on_sigterm(tmp_path):
    """Copied and run as the workload role runs it (``python3 -I``: no kit on the path):
    the host read every interval, the first source of the NVIDIA chain the node has, the
    AMD chain's absence said; SIGTERM ends it with its cost, and the controller's series
    holds the tool's samples."""
    shutil.copy(recorder_script(), tmp_path / "recorder.py")
    tool_on_path(tmp_path / "bin", "nvidia-smi", h100_noheader_lines())
    plan = recorder_plan(0.2, str(tmp_path / "telemetry.serve.raw.jsonl"))
    plan["chains"][0][1]["url"] = "http://127.0.0.1:9/metrics"  # no AMD exporter here
    plan["chains"][1][1]["url"] = "http://127.0.0.1:9/metrics"
    plan["tool_dirs"] = []
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"}
    proc = subprocess.Popen([NODE_PYTHON, "-I", "recorder.py", "plan.json"], cwd=tmp_path, env=env)
    try:
        out = tmp_path / "telemetry.serve.raw.jsonl"
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
    series = series_from_raw(out, "node0")
    assert [s.name for s in series.meta.sources] == ["host", "nvidia-smi"]
    assert series.meta.sources[1].command[0] == str(tmp_path / "bin" / "nvidia-smi")
    (amd,) = [n for n in series.meta.not_used if n.startswith("AMD")]
    assert "no amd-smi" in amd and "no rocm-smi" in amd
    assert len(series.host) >= 5 and len(series.gpu) >= 8
    assert {s.gpu for s in series.gpu} == {0, 1, 2, 3}
    assert series.end is not None and series.unreadable == 0
    assert any(c.source == "nvidia-smi" and c.tool_cpu_s is not None for c in series.end.cost)
