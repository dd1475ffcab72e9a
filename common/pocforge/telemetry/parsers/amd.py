"""AMD's telemetry tools: ``amd-smi metric --json``, ``rocm-smi --json`` and the AMD Device
Metrics Exporter's Prometheus text (:mod:`pocforge.telemetry.parsers` says the conventions)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from pocforge.telemetry.parsers.sample import (
    _UNAVAILABLE,
    GIB,
    KIB,
    MIB,
    GpuSample,
    TelemetryParseError,
    _as_bytes,
    _Fold,
    _index,
    _number,
    _prometheus_samples,
    _scaled,
    _timestamp,
)

# --- amd-smi metric --json ----------------------------------------------------------------

# Unit strings amd-smi puts beside values, to the sample's unit. A bare number (amd-smi before
# ROCm 6.1 printed no units) is in the field's default unit, the first of each table.
_AMD_UNITS: Mapping[str, Mapping[str | None, float]] = {
    "W": {None: 1.0, "W": 1.0, "mW": 1e-3},
    "J": {None: 1.0, "J": 1.0, "mJ": 1e-3, "uJ": 1e-6, "μJ": 1e-6},
    "%": {None: 1.0, "%": 1.0},
    "MHz": {None: 1.0, "MHz": 1.0, "GHz": 1e3},
    "C": {None: 1.0, "C": 1.0, "°C": 1.0},
    "bytes": {None: MIB, "MB": MIB, "GB": GIB, "KB": KIB, "B": 1.0},
    "Mb/s": {None: 1.0, "Mb/s": 1.0},
}


def _amd_reading(entry: Mapping[str, Any], gpu: int, unit: str, *path: str) -> float | None:
    """The reading at ``path`` in one amd-smi GPU object, converted to ``unit``.

    A missing key or an ``"N/A"`` block is an unreported value; anything else that is not a
    ``{"value": v, "unit": u}`` reading, a number or ``"N/A"`` is an error."""
    node: Any = entry
    for key in path:
        if not isinstance(node, Mapping):
            if isinstance(node, str) and _UNAVAILABLE.match(node):
                return None
            raise TelemetryParseError(
                "amd-smi", f"GPU {gpu}: {'.'.join(path)}: expected an object, got {node!r}"
            )
        if key not in node:
            return None
        node = node[key]
    what = f"GPU {gpu}: {'.'.join(path)}"
    raw_unit = None
    if isinstance(node, Mapping):
        if "value" not in node:
            raise TelemetryParseError("amd-smi", f"{what}: reading without a value: {node!r}")
        node, raw_unit = node["value"], node.get("unit")
    value = _number("amd-smi", what, node)
    factors = _AMD_UNITS[unit]
    if raw_unit not in factors:
        raise TelemetryParseError("amd-smi", f"{what}: unknown unit {raw_unit!r}")
    return _scaled(value, factors[raw_unit])


def _amd_clock(entry: Mapping[str, Any], gpu: int, domain: str) -> float | None:
    """Highest current clock among the ``gfx_N`` (or ``mem_N``) domains amd-smi lists."""
    clocks = entry.get("clock")
    if not isinstance(clocks, Mapping):
        return None
    pattern = re.compile(rf"{domain}(_\d+)?")
    values = [
        _amd_reading(clocks, gpu, "MHz", name, "clk")
        for name in clocks
        if pattern.fullmatch(str(name))
    ]
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _amd_throttle(entry: Mapping[str, Any]) -> tuple[str, ...] | None:
    power = entry.get("power")
    status = power.get("throttle_status") if isinstance(power, Mapping) else None
    if not isinstance(status, str) or _UNAVAILABLE.match(status):
        return None
    return () if status.upper() == "UNTHROTTLED" else (status,)


def parse_amd_smi_metric_json(
    text: str, *, host: str, timestamp: float | None = None, output_time: bool = True
) -> list[GpuSample]:
    """``amd-smi metric --json`` (any subset of its sections, e.g. ``-p -u -c -t -m -E``).

    ``output_time=False`` stamps every GPU with ``timestamp`` even where the output has its
    own: watch mode's is ``int(time.time())`` (``amdsmi_cli/amdsmi_commands.py``), up to a
    second early, while the recorder knows when it read the document to the millisecond."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TelemetryParseError("amd-smi", f"not JSON ({exc})") from None
    if isinstance(data, Mapping) and "gpu_data" in data:
        data = data["gpu_data"]
    if not isinstance(data, list):
        raise TelemetryParseError(
            "amd-smi",
            f"expected a list of GPUs or {{'gpu_data': [...]}}, got {type(data).__name__}",
        )
    samples = []
    for entry in data:
        if not isinstance(entry, Mapping) or "gpu" not in entry:
            raise TelemetryParseError("amd-smi", f"GPU entry without a 'gpu' index: {entry!r}")
        gpu = _index("amd-smi", entry["gpu"])
        stamp = entry.get("timestamp") if output_time else None
        found = _number("amd-smi", f"GPU {gpu}: timestamp", stamp) if stamp is not None else None
        samples.append(
            GpuSample(
                source="amd-smi",
                host=host,
                gpu=gpu,
                timestamp_s=_timestamp("amd-smi", found, timestamp),
                power_w=_amd_reading(entry, gpu, "W", "power", "socket_power"),
                energy_j=_amd_reading(entry, gpu, "J", "energy", "total_energy_consumption"),
                gfx_util_pct=_amd_reading(entry, gpu, "%", "usage", "gfx_activity"),
                mem_util_pct=_amd_reading(entry, gpu, "%", "usage", "umc_activity"),
                mem_used_bytes=_as_bytes(
                    _amd_reading(entry, gpu, "bytes", "mem_usage", "used_vram")
                ),
                mem_total_bytes=_as_bytes(
                    _amd_reading(entry, gpu, "bytes", "mem_usage", "total_vram")
                ),
                sm_clock_mhz=_amd_clock(entry, gpu, "gfx"),
                mem_clock_mhz=_amd_clock(entry, gpu, "mem"),
                temp_edge_c=_amd_reading(entry, gpu, "C", "temperature", "edge"),
                temp_hotspot_c=_amd_reading(entry, gpu, "C", "temperature", "hotspot"),
                temp_mem_c=_amd_reading(entry, gpu, "C", "temperature", "mem"),
                throttle=_amd_throttle(entry),
                pcie_bandwidth_mbps=_amd_reading(entry, gpu, "Mb/s", "pcie", "bandwidth"),
            )
        )
    return samples


# --- rocm-smi --json ----------------------------------------------------------------------

# rocm-smi labels (lower-cased: ROCm 2.x printed "(c)", later "(C)"), first present wins.
_ROCM_FIELDS: Mapping[str, tuple[str, ...]] = {
    "power_w": (
        "average graphics package power (w)",
        "current socket graphics package power (w)",
    ),
    "gfx_util_pct": ("gpu use (%)",),
    "mem_util_pct": ("gpu memory use (%)", "gpu memory read/write activity (%)"),
    "temp_edge_c": ("temperature (sensor edge) (c)",),
    "temp_hotspot_c": ("temperature (sensor junction) (c)",),
    "temp_mem_c": ("temperature (sensor memory) (c)", "temperature (sensor mem) (c)"),
    "mem_used_bytes": ("vram total used memory (b)",),
    "mem_total_bytes": ("vram total memory (b)",),
    "sm_clock_mhz": ("sclk clock speed:",),
    "mem_clock_mhz": ("mclk clock speed:",),
}
_ROCM_CLOCK = re.compile(r"^\((\d+(?:\.\d+)?)\s*mhz\)$", re.IGNORECASE)


def _rocm_value(card: int, label: str, raw: Any) -> float | None:
    what = f"card{card}: {label!r}"
    if label.endswith("clock speed:") and isinstance(raw, str) and not _UNAVAILABLE.match(raw):
        match = _ROCM_CLOCK.match(raw.strip())
        if not match:
            raise TelemetryParseError("rocm-smi", f"{what}: {raw!r} is not a '(<n>Mhz)' clock")
        return float(match.group(1))
    return _number("rocm-smi", what, raw)


def parse_rocm_smi_json(text: str, *, host: str, timestamp: float) -> list[GpuSample]:
    """``rocm-smi [--showpower --showuse --showmemuse --showtemp --showmeminfo vram ...] --json``.

    Keys other than ``cardN`` (newer releases add ``"system"``) are ignored."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TelemetryParseError("rocm-smi", f"not JSON ({exc})") from None
    if not isinstance(data, Mapping):
        raise TelemetryParseError("rocm-smi", f"expected an object, got {type(data).__name__}")
    samples = []
    for key, fields in data.items():
        match = re.fullmatch(r"card(\d+)", str(key))
        if not match:
            continue
        card = int(match.group(1))
        if not isinstance(fields, Mapping):
            raise TelemetryParseError("rocm-smi", f"{key}: expected an object, got {fields!r}")
        lowered = {str(k).lower(): v for k, v in fields.items()}
        values: dict[str, float | None] = {}
        for name, labels in _ROCM_FIELDS.items():
            label = next((label for label in labels if label in lowered), None)
            values[name] = None if label is None else _rocm_value(card, label, lowered[label])
        samples.append(
            GpuSample(
                source="rocm-smi",
                host=host,
                gpu=card,
                timestamp_s=timestamp,
                power_w=values["power_w"],
                gfx_util_pct=values["gfx_util_pct"],
                mem_util_pct=values["mem_util_pct"],
                mem_used_bytes=_as_bytes(values["mem_used_bytes"]),
                mem_total_bytes=_as_bytes(values["mem_total_bytes"]),
                sm_clock_mhz=values["sm_clock_mhz"],
                mem_clock_mhz=values["mem_clock_mhz"],
                temp_edge_c=values["temp_edge_c"],
                temp_hotspot_c=values["temp_hotspot_c"],
                temp_mem_c=values["temp_mem_c"],
            )
        )
    if not samples:
        raise TelemetryParseError("rocm-smi", "no cardN entries in the output")
    return sorted(samples, key=lambda s: s.gpu)


# AMD Device Metrics Exporter series -> (sample field, factor); units per its
# docs/configuration/metricslist.md: W, %, µJ, °C, MB (MiB), Mb/s.
_AMD_EXPORTER_GAUGES: Mapping[str, tuple[str, float]] = {
    "gpu_package_power": ("power_w", 1.0),
    "gpu_gfx_activity": ("gfx_util_pct", 1.0),
    "gpu_umc_activity": ("mem_util_pct", 1.0),
    "gpu_edge_temperature": ("temp_edge_c", 1.0),
    "gpu_junction_temperature": ("temp_hotspot_c", 1.0),
    "gpu_memory_temperature": ("temp_mem_c", 1.0),
    "gpu_used_vram": ("mem_used_bytes", MIB),
    "gpu_total_vram": ("mem_total_bytes", MIB),
    "pcie_bandwidth": ("pcie_bandwidth_mbps", 1.0),
}
_AMD_EXPORTER_AVERAGE_POWER = "gpu_average_package_power"  # MI2xx/Radeon: no current power
# gpu_clock{clock_type=...}: the label's short spelling (docs) and the enum one (newer builds).
_AMD_EXPORTER_CLOCKS: Mapping[str, str] = {
    "system": "sm_clock_mhz",
    "GPU_CLOCK_TYPE_SYSTEM": "sm_clock_mhz",
    "memory": "mem_clock_mhz",
    "GPU_CLOCK_TYPE_MEMORY": "mem_clock_mhz",
}
_AMD_EXPORTER_LINKS: Mapping[str, str] = {
    "gpu_xgmi_link_rx": "fabric_rx_bytes",
    "gpu_xgmi_link_tx": "fabric_tx_bytes",
}


def parse_amd_metrics_exporter(
    text: str, *, timestamp: float, host: str | None = None
) -> list[GpuSample]:
    """The AMD Device Metrics Exporter's ``/metrics``; ``host`` defaults to its ``hostname``
    label. XGMI rx/tx (KB, accumulated) are summed over ``link_index``."""
    fold = _Fold("amd-metrics-exporter")
    average_power: dict[int, float | None] = {}
    links: dict[tuple[int, str], dict[str, float]] = {}
    for name, sample in _prometheus_samples("amd-metrics-exporter", text):
        labels = sample.labels
        mapped = (
            name in _AMD_EXPORTER_GAUGES
            or name in _AMD_EXPORTER_LINKS
            or name in (_AMD_EXPORTER_AVERAGE_POWER, "gpu_energy_consumed")
            or (name == "gpu_clock" and labels.get("clock_type") in _AMD_EXPORTER_CLOCKS)
        )
        if not mapped:
            continue
        gpu = fold.gpu(labels, "gpu_id")
        if labels.get("hostname"):
            fold.hosts.setdefault(gpu, labels["hostname"])
        value = float(sample.value)
        if name in _AMD_EXPORTER_GAUGES:
            field, factor = _AMD_EXPORTER_GAUGES[name]
            scaled = value * factor
            fold.first(gpu, field, _as_bytes(scaled) if field.endswith("_bytes") else scaled)
        elif name == _AMD_EXPORTER_AVERAGE_POWER:
            average_power.setdefault(gpu, value)
        elif name == "gpu_energy_consumed":
            fold.largest(gpu, "energy_j", value * 1e-6)
        elif name == "gpu_clock":
            fold.largest(gpu, _AMD_EXPORTER_CLOCKS[labels["clock_type"]], value)
        else:
            link = labels.get("link_index", "")
            links.setdefault((gpu, _AMD_EXPORTER_LINKS[name]), {}).setdefault(link, value * KIB)
    for gpu, power in average_power.items():
        fields = fold.fields.setdefault(gpu, {})
        if fields.get("power_w") is None:
            fields["power_w"] = power
    for (gpu, field), per_link in links.items():
        fold.fields.setdefault(gpu, {})[field] = sum(per_link.values())
    if not fold.fields:
        raise TelemetryParseError("amd-metrics-exporter", "no gpu_* series this parser reads")
    return fold.samples(host, timestamp)
