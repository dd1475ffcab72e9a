"""The dashboard's "where the watts go" part of a serving workload, from the telemetry the
runner sampled at each point (``telemetry-<point>.jsonl``, :mod:`pocforge.telemetry`).

Over the workload's time (seconds from its first sample), per node: the power of its
devices (GPUs summed, else CPU packages), the utilisation of its GPUs and CPUs, and the
latency of the requests sent, each the median or mean of a bin of at least one sampling
interval (never more than :data:`MAX_BINS` bins, so a long sweep stays small); the points'
measured windows are marked. Beside it, a table of the energy figures per point. Nothing
is drawn that was not measured: no power row without power readings, no section without
telemetry.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from statistics import mean, median
from typing import Any

from pocforge.results.serving import load_records
from pocforge.results.stage_schema import ServingPoint, ServingResult, TrainingResult
from pocforge.telemetry.host import HostSample, PackageSample
from pocforge.telemetry.parsers import GpuSample
from pocforge.telemetry.series import Series

MAX_BINS = 1500
ENERGY_METRICS = ("avg_power_w", "joules_per_token", "tokens_per_s_per_kw")
Curve = tuple[list[float | None], list[float | None]]


def load(result: ServingResult, folder: Path | None) -> list[tuple[ServingPoint, Series]]:
    """The points whose telemetry file is in ``folder``, with their series."""
    out = []
    for p in result.points:
        if folder is None or not p.telemetry_file:
            continue
        path = folder / p.telemetry_file
        if path.is_file():
            out.append((p, Series.read(path)))
    return out


def _bins(t0: float, width: float, items: Iterable[tuple[float, Any, float]]) -> dict:
    """(time, key, value) -> {key: {bin: [values]}}."""
    out: dict[Any, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for t, key, value in items:
        if value is not None and math.isfinite(value):
            out[key][int((t - t0) // width)].append(value)
    return out


def _curve(bins: dict[int, float], width: float) -> Curve:
    """Bin centres and values, a None between bins that are not neighbours: a line is not
    drawn across time nothing was measured in (between points, for latency)."""
    xs: list[float | None] = []
    ys: list[float | None] = []
    previous = None
    for k in sorted(bins):
        if previous is not None and k > previous + 1:
            xs.append(None)
            ys.append(None)
        xs.append(round((k + 0.5) * width, 3))
        ys.append(round(bins[k], 3))
        previous = k
    return xs, ys


def _summed(t0: float, width: float, items: Iterable[tuple[float, Any, float | None]]) -> dict:
    """(time, (node, device), value) -> {node: {bin: sum over its devices of their bin
    means}}, over the bins where every device of the node has a reading."""
    per_device = _bins(t0, width, items)
    out = {}
    for node in sorted({h for h, _ in per_device}):
        devices = [v for (h, _), v in per_device.items() if h == node]
        common = set.intersection(*(set(d) for d in devices))
        summed = {b: sum(mean(d[b]) for d in devices) for b in common}
        if summed:
            out[node] = summed
    return out


def _link_rates(gpu: Sequence[GpuSample]) -> list[tuple[float, tuple[str, int], str, float]]:
    """(time, (node, GPU), link, bytes/s): the rates a tool reports (DCGM's NVLink and PCIe),
    and the accumulated xGMI/NVLink byte counters (AMD's exporter) differenced between a
    GPU's readings."""
    out = []
    previous: dict[tuple[str, int], tuple[float, float]] = {}
    for s in sorted(gpu, key=lambda s: s.timestamp_s):
        key = (s.host, s.gpu)
        fabric = [v for v in (s.fabric_tx_bytes_per_s, s.fabric_rx_bytes_per_s) if v is not None]
        pcie = [v for v in (s.pcie_tx_bytes_per_s, s.pcie_rx_bytes_per_s) if v is not None]
        if fabric:
            out.append((s.timestamp_s, key, "fabric", sum(fabric)))
        if pcie:
            out.append((s.timestamp_s, key, "pcie", sum(pcie)))
        counted = [v for v in (s.fabric_tx_bytes, s.fabric_rx_bytes) if v is not None]
        if counted:
            total = sum(counted)
            before = previous.get(key)
            if before and s.timestamp_s > before[0] and total >= before[1]:
                rate = (total - before[1]) / (s.timestamp_s - before[0])
                out.append((s.timestamp_s, key, "fabric", rate))
            previous[key] = (s.timestamp_s, total)
    return out


def device_curves(
    gpu: Sequence[GpuSample],
    host: Sequence[HostSample],
    packages: Sequence[PackageSample],
    t0: float,
    width: float,
    _: Callable[[str], str],
) -> tuple[dict[str, Curve], dict[str, Curve], dict[str, Curve]]:
    """Per node, its devices' power (GPUs summed, else CPU packages), its GPUs' and CPUs'
    utilisation, and its GPUs' link traffic (NVLink/xGMI, PCIe; sent and received, summed
    over GPUs), in bins of ``width`` seconds from ``t0``."""
    power: dict[str, Curve] = {}
    # a node's GPU power per bin: each GPU's mean, summed, where every GPU has a reading
    summed = _summed(t0, width, ((s.timestamp_s, (s.host, s.gpu), s.power_w) for s in gpu))
    for node, bins in summed.items():
        power[_("{node}: GPUs").format(node=node)] = _curve(bins, width)
    if not power:
        summed = _summed(
            t0, width, ((s.timestamp_s, (s.host, s.package), s.power_w) for s in packages)
        )
        for node, bins in summed.items():
            power[_("{node}: CPU packages").format(node=node)] = _curve(bins, width)

    util: dict[str, Curve] = {}
    for node, bins in sorted(
        _bins(t0, width, ((s.timestamp_s, s.host, s.gfx_util_pct) for s in gpu)).items()
    ):
        util[_("{node}: GPU").format(node=node)] = _curve(
            {b: mean(v) for b, v in bins.items()}, width
        )
    for node, bins in sorted(
        _bins(t0, width, ((s.timestamp_s, s.host, s.cpu_util_pct) for s in host)).items()
    ):
        util[_("{node}: CPU").format(node=node)] = _curve(
            {b: mean(v) for b, v in bins.items()}, width
        )

    links: dict[str, Curve] = {}
    rates = _link_rates(gpu)
    names = {"fabric": _("{node}: NVLink/xGMI"), "pcie": _("{node}: PCIe")}
    for kind, name in names.items():
        items = ((t, key, rate / 1e9) for t, key, k, rate in rates if k == kind)
        for node, bins in _summed(t0, width, items).items():
            links[name.format(node=node)] = _curve(bins, width)
    return power, util, links


def timeline(
    loaded: list[tuple[ServingPoint, Series]], folder: Path | None, _: Callable[[str], str]
) -> dict[str, Any]:
    """The curves of the workload's timeline (see the module notes) and the point windows,
    their names in the language of ``_``."""
    gpu = [s for _, series in loaded for s in series.gpu]
    host = [s for _, series in loaded for s in series.host]
    packages = [s for _, series in loaded for s in series.packages]
    times = [s.timestamp_s for s in (*gpu, *host, *packages)]
    if not times:
        return {}
    t0 = min(times)
    interval = max(series.interval_s for _, series in loaded)
    width = max(interval, (max(times) - t0) / MAX_BINS)
    power, util, links = device_curves(gpu, host, packages, t0, width, _)

    windows = []
    requests: list[tuple[float, str, float]] = []
    for point, series in loaded:
        starts = {w.repeat: w.start_s for w in series.windows if w.repeat is not None}
        for w in series.windows:
            windows.append((point.id, round(w.start_s - t0, 3), round(w.end_s - t0, 3)))
        if folder is None or not point.records_file or not starts:
            continue
        path = folder / point.records_file
        if not path.is_file():
            continue
        records, _total = load_records(path)
        for r in records:
            if r.success and r.repeat in starts:
                sent = starts[r.repeat] + r.sent_s
                requests.append((sent, "ttft_ms", r.ttft_ms))
                if r.tpot_ms is not None:
                    requests.append((sent, "tpot_ms", r.tpot_ms))
    label = {"ttft_ms": "TTFT", "tpot_ms": "TPOT"}
    latency = {
        _("median {metric}").format(metric=label[name]): _curve(
            {b: median(v) for b, v in bins.items()}, width
        )
        for name, bins in sorted(_bins(t0, width, requests).items())
    }
    return {"power": power, "util": util, "links": links, "latency": latency, "windows": windows}


def rows(
    loaded: list[tuple[ServingPoint, Series]], words: Mapping[str, str]
) -> list[dict[str, Any]]:
    """One row per point: its energy figures (the sweep's aggregate) and how they were got;
    ``words`` names the devices (GPU, CPU package) and methods (counter, power)."""
    out = []
    for point, series in loaded:
        values = {m: point.metrics.get(m, {}).get("value") for m in ENERGY_METRICS}
        values["usd_per_million_tokens"] = point.metrics.get("usd_per_million_tokens", {}).get(
            "value"
        )
        estimates = [e for w in series.windows if w.energy for e in w.energy.per_gpu]
        devices = sorted({words.get(e.device, e.device) for e in estimates})
        methods = sorted({words.get(e.method, e.method) for e in estimates if e.valid and e.method})
        problems = list(dict.fromkeys(w.problem for w in series.windows if w.problem))
        out.append(
            {
                "id": point.id,
                **values,
                "devices": ", ".join(devices) or "—",
                "methods": ", ".join(methods) or "—",
                "sources": ", ".join(series.sources) or "—",
                "problems": problems,
            }
        )
    return out


def training_timeline(
    series: Series, result: TrainingResult, _: Callable[[str], str]
) -> dict[str, Any]:
    """The training run's power and utilisation per node over its time, beside each
    step's time at the moment it ended (the kit's own runs record it), the measured steps'
    window shaded; {} without samples."""
    times = [s.timestamp_s for s in (*series.gpu, *series.host, *series.packages)]
    if not times:
        return {}
    t0 = min(times)
    width = max(series.interval_s, (max(times) - t0) / MAX_BINS)
    power, util, links = device_curves(series.gpu, series.host, series.packages, t0, width, _)
    timed = [s for s in result.steps if s.ended_unix_s is not None and s.step_time_s]
    steps: dict[str, Curve] = {}
    if timed:
        steps[_("step time")] = (
            [round((s.ended_unix_s or 0.0) - t0, 3) for s in timed],
            [round(s.step_time_s or 0.0, 4) for s in timed],
        )
    windows = [
        (_("measured steps"), round(w.start_s - t0, 3), round(w.end_s - t0, 3))
        for w in series.windows
        if w.label == "training steps"
    ]
    return {"power": power, "util": util, "links": links, "steps": steps, "windows": windows}


def training_rows(series: Series, words: Mapping[str, str]) -> list[dict[str, Any]]:
    """The training telemetry's windows (the whole run, its measured steps) and their
    energy: J, average W, J per training token where tokens were counted."""
    out = []
    for w in series.windows:
        energy = w.energy if w.energy is not None and w.energy.valid else None
        per_token = energy.joules_per_output_token if energy and w.output_tokens else None
        out.append(
            {
                "label": words.get(w.label, w.label),
                "seconds": w.end_s - w.start_s,
                "energy_j": energy.energy_j if energy else None,
                "avg_power_w": energy.avg_power_w if energy else None,
                "tokens": w.output_tokens or None,
                "joules_per_token": per_token,
                "devices": words.get(w.devices or "", w.devices or "—"),
                "problem": w.problem,
            }
        )
    return out
