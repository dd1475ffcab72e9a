"""The runner's telemetry hook around a sweep point: the recorder in this process, a
stand-in nvidia-smi printing two GPUs at a known power, the figures put into the point's
repeats; a node without power gets a note, not a figure."""

from __future__ import annotations

import shutil
import sys
import time

import pytest

from pocforge.bench.summary import ClientHealth, PointSummary, RepeatResult
from pocforge.runner.telemetry import ServingTelemetry
from pocforge.stats import describe
from pocforge.telemetry.series import Series
from pocforge.telemetry.sources import recorder_plan
from tests.telemetry.captures import nvidia_smi_live, stand_in

pytestmark = pytest.mark.process  # the stand-in tool is a process of its own

PYTHON = shutil.which("python3") or sys.executable
NOWHERE = "http://127.0.0.1:9/metrics"


def plan_with(tmp_path, bin_dir=None):
    """The kit's plan with this test's tools only, no exporters and no RAPL."""

    def plan(interval_s: float, out: str) -> dict:
        return recorder_plan(interval_s, out, tool_dirs=[str(bin_dir)] if bin_dir else [],
                             amd_exporter_url=NOWHERE, dcgm_exporter_url=NOWHERE,
                             powercap=str(tmp_path / "none"))  # fmt: skip

    return plan


def repeat(n: int, start: float, duration: float, tok_s: float) -> RepeatResult:
    empty = describe([])
    client = ClientHealth(limited=False, loop_lag_ms=empty, send_delay_ms=empty, cpu_s=0,
                          cpu_utilisation=0)  # fmt: skip
    return RepeatResult(repeat=n, status="ok", started_at="", duration_s=duration,
                        started_unix_s=start, requests_sent=1, completed=1, failed=0,
                        offered_rate=None, achieved_rate=None, peak_concurrency=1,
                        metrics={"output_throughput": tok_s}, client=client)  # fmt: skip


def test_hook_puts_energy_into_the_points_repeats(tmp_path):
    """Two GPUs at 250 W (nvidia-smi's rows) for a 0.6 s repeat producing 100 tok/s: 500 W, 5 J per token,
    200 tok/s per kW, and at $2/GPU-hour 2 × 0.6/3600 × 2 / (60/10^6) $ per million."""
    bin_dir = stand_in(tmp_path / "bin", "nvidia-smi", nvidia_smi_live(2, 250.0), PYTHON)
    hook = ServingTelemetry(tmp_path, gpus=2, price=2.0, say=lambda _: None, interval_s=0.1,
                            plan=plan_with(tmp_path, bin_dir))  # fmt: skip
    point = PointSummary(id="c4", mode="concurrency", value=4, status="ok",
                         records_file="requests-c4.jsonl", repeats=[])  # fmt: skip
    hook.before(point)
    start = time.time() + 0.1
    time.sleep(0.8)
    point.repeats.append(repeat(0, start, 0.6, 100.0))
    hook.after(point)
    metrics = point.repeats[0].metrics
    assert metrics["avg_power_w"] == pytest.approx(500.0)
    assert metrics["joules_per_token"] == pytest.approx(5.0)
    assert metrics["tokens_per_s_per_kw"] == pytest.approx(200.0)
    assert metrics["usd_per_million_tokens"] == pytest.approx(2 * 0.6 / 3600 * 2 / 60e-6)
    assert point.telemetry_file == "telemetry-c4.jsonl" and point.notes == []
    (win,) = Series.read(tmp_path / point.telemetry_file).windows
    assert win.repeat == 0 and win.energy.valid and hook.recording is None
    assert (tmp_path / "telemetry-c4.raw.jsonl").is_file()  # what the recorder wrote, kept


def test_hook_on_a_node_without_power_adds_no_energy_and_says_why(tmp_path):
    """This machine: the host only, no RAPL. The price still gives $ per million tokens."""
    hook = ServingTelemetry(tmp_path, gpus=1, price=1.0, say=lambda _: None, interval_s=0.1,
                            plan=plan_with(tmp_path))  # fmt: skip
    point = PointSummary(id="c1", mode="concurrency", value=1, status="ok",
                         records_file="requests-c1.jsonl", repeats=[])  # fmt: skip
    hook.before(point)
    start = time.time() + 0.1
    time.sleep(0.5)
    point.repeats.append(repeat(0, start, 0.3, 50.0))
    hook.after(point)
    assert set(point.repeats[0].metrics) == {"output_throughput", "usd_per_million_tokens"}
    assert point.notes == ["energy not measured: no power source on the node (no GPU tool, "
                           "no readable RAPL)"]  # fmt: skip
    assert Series.read(tmp_path / "telemetry-c1.jsonl").host
