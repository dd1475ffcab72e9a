"""A real sweep's output (tests/data/importers) given telemetry, through the runner's own
code: each point's series is made of samples of a known, synthetic power and utilisation
instead of a GPU tool's records, and measured as a recorded one is
(:func:`pocforge.runner.telemetry.measure_point`) once its repeats have windows, so
the energy figures are what the physics says (constant power P on G GPUs over T seconds
is P·G·T joules) and land where a real run puts them."""

from __future__ import annotations

import shutil
from pathlib import Path

from pocforge.bench.aggregate import aggregate
from pocforge.bench.environment import definitions
from pocforge.bench.summary import Summary, write_summary
from pocforge.runner.telemetry import measure_point
from pocforge.telemetry.host import HostSample
from pocforge.telemetry.parsers import GpuSample
from pocforge.telemetry.series import Meta, Series, SourceInfo

T0 = 1_764_590_400.0  # 2025-12-01T12:00:00Z: when the synthetic sweep starts
GAP_S = 3.0  # between repeats: warm-up and the server check


def with_telemetry(
    source: Path,
    dest: Path,
    *,
    power_w: float | None = 300.0,
    gpus: int = 1,
    interval_s: float = 1.0,
    price: float | None = None,
    cut_s: float | None = None,
) -> Path:
    """``source`` copied to ``dest`` with telemetry; ``power_w=None``: a node whose only
    source is the host (no power). ``cut_s``: the samples stop that long after the first
    point's first window starts (a recorder that died)."""
    shutil.copytree(source, dest)
    summary = Summary.model_validate_json((dest / "summary.json").read_text())
    t = T0
    for point in summary.points:
        series = Series()
        series.meta = Meta(host="node-0", interval_s=interval_s, started_s=t,
                           sources=[SourceInfo(name="amd-smi")],
                           not_used=["synthetic: samples made by tests/telemetry/sweeps.py"])  # fmt: skip
        first = t + GAP_S
        for r in point.repeats:
            t += GAP_S
            r.started_unix_s = t
            t += r.duration_s
        stamp = first - GAP_S
        while stamp <= t + 2 * interval_s:
            if cut_s is None or stamp <= T0 + GAP_S + cut_s:
                busy = (
                    80.0
                    if any(
                        r.started_unix_s <= stamp <= r.started_unix_s + r.duration_s
                        for r in point.repeats
                    )
                    else 5.0
                )
                for gpu in range(gpus) if power_w is not None else ():
                    series.gpu.append(
                        GpuSample(
                            source="amd-smi",
                            host="node-0",
                            gpu=gpu,
                            timestamp_s=stamp,
                            power_w=power_w,
                            gfx_util_pct=busy,
                        )
                    )
                series.host.append(
                    HostSample(host="node-0", timestamp_s=stamp, cpu_util_pct=busy / 2)
                )
            stamp += interval_s
        measure_point(dest, point, series, interval_s=interval_s, gpus=gpus, price=price)
        added = {k for r in point.repeats for k in r.metrics} - set(summary.definitions)
        summary.definitions.update(definitions(sorted(added)))
        point.aggregate = aggregate(point.repeats)
    write_summary(summary, dest)
    return dest
