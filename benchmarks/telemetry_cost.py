"""Benchmark: what the telemetry recorder costs (target: ≤ 1 % of one core at 1 s).

The recorder (``pocforge/telemetry/recorder.py``, standard library only) is the one engine:
the runner runs it in the kit's process here, the workload role as a process of its own
beside a node's launches. Three measurements, printed as tables:

1. The recorder in this process, as the runner runs it: the host source (``/proc``, RAPL
   where readable) at 1 s for ``--seconds``: the CPU time of its thread (its reads and
   writes), as a share of one core over the wall time.
1b. The recorder as a node runs it (``python3 -I recorder.py plan.json``) at 1 s for
   ``--seconds``: its process's CPU time from its first reading on over the wall time (the
   target), and over its whole life, the interpreter's start included.
2. What each vendor tool's output costs the reader to parse, on the real captures of
   ``tests/data/telemetry/`` (per document, scaled to 8 GPUs a node, once a second). The
   tools' own processes (nvidia-smi, amd-smi's Python CLI) are not installed here: their
   cost is measured where they run (the series' ``end`` line records it per source).
3. Whether it blocks the benchmark: the lateness of a 25 ms timer on an asyncio event
   loop (the load generator's) with and without the recorder at 0.1 s in the same process.

``python -m benchmarks.telemetry_cost [--seconds N]``; part of ``make bench``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC
from pathlib import Path

from rich.console import Console
from rich.table import Table

from pocforge.stats import describe
from pocforge.telemetry.parsers import (
    NVIDIA_SMI_QUERY_FIELDS,
    nvidia_smi_rows,
    parse_amd_metrics_exporter,
    parse_amd_smi_metric_json,
    parse_dcgm_exporter,
    parse_nvidia_smi_csv,
    parse_rocm_smi_json,
)
from pocforge.telemetry.reader import read_raw
from pocforge.telemetry.recorder import Recorder, process_cpu_s
from pocforge.telemetry.sources import recorder_plan, recorder_script

TARGET_PCT = 1.0
DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "telemetry"
GPUS = 8
T = 1_764_590_400.0


def in_process_cost(seconds: float, interval_s: float = 1.0) -> tuple[float, int, str]:
    """(% of one core, host readings, what the host source reads) of the recorder in this
    process over ``seconds``."""
    with tempfile.TemporaryDirectory() as tmp:
        recorder = Recorder(recorder_plan(interval_s, str(Path(tmp) / "raw.jsonl"))).start()
        try:
            time.sleep(seconds)
        finally:
            recorder.stop()
        series = read_raw(recorder.path)
    assert series.end is not None and series.meta is not None
    return series.end.cpu_pct_of_core, len(series.host), series.meta.sources[0].detail


def recorder_cost(seconds: float, interval_s: float = 1.0) -> tuple[float, float, int, int]:
    """(% of one core once started, % of its whole life, host readings, GPU samples) of the
    recorder run as a node runs it (``python3 -I recorder.py plan.json``) for
    ``seconds``, stopped with SIGTERM. Once started: its process's CPU time (``/proc``)
    from its first reading to the stop; its whole life: the same from its spawn, the
    interpreter's start included."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        shutil.copy(recorder_script(), folder / "recorder.py")
        raw = folder / "raw.jsonl"
        plan = recorder_plan(interval_s, str(raw))
        (folder / "plan.json").write_text(json.dumps(plan))
        python = shutil.which("python3") or sys.executable
        spawned = time.monotonic()
        proc = subprocess.Popen([python, "-I", "recorder.py", "plan.json"], cwd=folder)
        while '"kind":"host"' not in (raw.read_text() if raw.exists() else ""):
            time.sleep(0.01)
        cpu0, t0 = process_cpu_s(proc.pid) or 0.0, time.monotonic()
        time.sleep(seconds)
        cpu1, t1 = process_cpu_s(proc.pid) or 0.0, time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        series = read_raw(raw, "node")
    end = series.end
    if end is None:
        raise RuntimeError("the recorder wrote no end line")
    steady = 100.0 * (cpu1 - cpu0) / (t1 - t0)
    return steady, 100.0 * cpu1 / (t1 - spawned), len(series.host), len(series.gpu)


def _per_call_s(fn: Callable[[], object], repeat: int = 300) -> float:
    fn()
    started = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - started) / repeat


def parser_costs() -> list[tuple[str, str, int, float]]:
    """(source, capture, GPUs in it, s per document scaled to GPUS GPUs)."""
    h100 = nvidia_smi_rows((DATA / "nvidia_smi_csv_nounits_4xh100.csv").read_text())
    column = {"power.draw": "power.draw.average"}
    line = ", ".join(h100[0].get(column.get(f, f)) or "[N/A]" for f in NVIDIA_SMI_QUERY_FIELDS)
    amd = (DATA / "amd_smi_metric_power_json_changelog.json").read_text()
    rocm = (DATA / "rocm_smi_json_2x_rx6800_showmemuse.json").read_text()
    dcgm = (DATA / "dcgm_exporter_a30_mig.prom").read_text()
    exporter = (DATA / "amd_metrics_exporter_vram_energy.prom").read_text()
    cases = [
        ("nvidia-smi -lms", "4x H100 row, noheader", 1, lambda: parse_nvidia_smi_csv(
            line, host="h", fields=NVIDIA_SMI_QUERY_FIELDS, tz=UTC)),
        ("amd-smi --watch", "CHANGELOG power JSON", 1, lambda: parse_amd_smi_metric_json(
            amd, host="h", timestamp=T)),
        ("rocm-smi", "2x RX 6800 JSON", 2, lambda: parse_rocm_smi_json(
            rocm, host="h", timestamp=T)),
        ("dcgm-exporter", "2x A30 MIG scrape", 2, lambda: parse_dcgm_exporter(
            dcgm, timestamp=T, host="h")),
        ("amd-metrics-exporter", "1 GPU scrape", 1, lambda: parse_amd_metrics_exporter(
            exporter, timestamp=T, host="h")),
    ]  # fmt: skip
    return [(name, what, n, _per_call_s(fn) * GPUS / n) for name, what, n, fn in cases]


async def _lag(seconds: float) -> dict[str, float | None]:
    """Lateness of a 25 ms timer on this loop, ms."""
    late = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        due = time.perf_counter() + 0.025
        await asyncio.sleep(0.025)
        late.append((time.perf_counter() - due) * 1000)
    return describe(late)


def loop_lag(seconds: float) -> tuple[dict, dict]:
    alone = asyncio.run(_lag(seconds))
    with tempfile.TemporaryDirectory() as tmp:
        recorder = Recorder(recorder_plan(0.1, str(Path(tmp) / "raw.jsonl"))).start()
        try:
            recorded = asyncio.run(_lag(seconds))
        finally:
            recorder.stop()
    return alone, recorded


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    console = Console()

    pct, samples, detail = in_process_cost(args.seconds)
    table = Table("source", "interval", "wall s", "samples", "% of one core", "target")
    ok = pct <= TARGET_PCT
    table.add_row(
        "host", "1 s", f"{args.seconds:g}", str(samples), f"{pct:.3f}", "ok" if ok else "OVER"
    )
    console.print("The recorder in this process (as the runner runs it)", table, f"host: {detail}")

    node_pct, whole_pct, readings, gpu_samples = recorder_cost(args.seconds)
    node_ok = node_pct <= TARGET_PCT
    table = Table("process", "interval", "wall s", "host readings", "GPU samples",
                  "% of one core", "whole life %", "target")  # fmt: skip
    table.add_row(
        "recorder.py (python3 -I)", "1 s", f"{args.seconds:g}", str(readings),
        str(gpu_samples), f"{node_pct:.3f}", f"{whole_pct:.3f}", "ok" if node_ok else "OVER",
    )  # fmt: skip
    console.print(
        "The recorder as a node runs it (once started; its whole life includes the interpreter's start)",
        table,
    )

    table = Table("source", "capture", f"µs per {GPUS}-GPU document", "% of one core at 1 s")
    for name, what, _, seconds in parser_costs():
        table.add_row(name, what, f"{seconds * 1e6:.0f}", f"{seconds * 100:.3f}")
    console.print("Reading the tools' output (their own processes not included)", table)

    alone, recorded = loop_lag(min(args.seconds, 5.0))
    table = Table("event loop", "25 ms timer late p50 ms", "p99 ms", "max ms")
    for name, lag in (("alone", alone), ("with the recorder at 0.1 s", recorded)):
        table.add_row(name, f"{lag['p50']:.2f}", f"{lag['p99']:.2f}", f"{lag['max']:.2f}")
    console.print("Does it block the load generator?", table)
    return 0 if ok and node_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
