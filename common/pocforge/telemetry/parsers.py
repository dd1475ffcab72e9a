"""One sample of a GPU telemetry tool's output -> normalized per-GPU :class:`GpuSample`.

One parser per source, each taking the tool's text and returning ``list[GpuSample]``:

- :func:`parse_amd_smi_metric_json` — ``amd-smi metric --json``, both shapes AMD has shipped:
  a list of per-GPU objects (amd-smi 24.x, ROCm 6.x) and ``{"gpu_data": [...]}`` (amd-smi
  26.x, ROCm 7.x); readings are ``{"value": v, "unit": u}`` or ``"N/A"``.
- :func:`parse_rocm_smi_json` — ``rocm-smi --json`` (``{"cardN": {"<label> (<unit>)": "v"}}``).
- :func:`parse_nvidia_smi_csv` — ``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]``:
  the sampler's form (:data:`NVIDIA_SMI_ARGS`, parsed by :data:`NVIDIA_SMI_QUERY_FIELDS`) and
  the header form with or without units in the cells.
- :func:`parse_dcgm_exporter` — dcgm-exporter's Prometheus text.
- :func:`parse_amd_metrics_exporter` — the AMD Device Metrics Exporter's Prometheus text.

``dcgmi dmon`` is not parsed: no text capture of its GPU rows was found in public issue
threads or NVIDIA's docs (only screenshots), and a parser tested on invented rows proves
nothing (see ``tests/data/README.md``).

Conventions every parser follows:

- A value the tool reports as unavailable (``N/A``, ``[N/A]``, ``[Not Supported]``, DCGM's
  blank sentinels) becomes ``None``; a reading that is present but not a number, a truncated
  line, a missing GPU index or undecodable text raises :class:`TelemetryParseError`, never a
  bare ``KeyError``.
- Units are converted to the sample's (W, J, %, bytes, MHz, °C). AMD's ``MB`` are MiB:
  amd-smi divides bytes by ``1024*1024`` (``amdsmi_cli/amdsmi_commands.py``), and an MI300X
  (192 GiB HBM3) reports ``TOTAL_VRAM: 196048 MB``, 191.5 GiB; AMD's ``KB`` are taken as KiB.
- A GPU that several series describe (MIG instances in dcgm-exporter, partitions in the AMD
  exporter, XCD clock domains in amd-smi) is folded into one sample per physical GPU: device
  gauges from the first series, the energy counter from the largest (the freshest read), and
  per-instance memory (MIG) left ``None`` because no instance's figure is the device's.
- ``timestamp_s`` comes from the output where the tool prints one (nvidia-smi's ``timestamp``
  field, amd-smi's watch-mode ``timestamp``), else from the caller's ``timestamp`` (when the
  sampler read the output); neither is an error.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, tzinfo
from typing import Any, Literal

from prometheus_client.parser import text_string_to_metric_families
from pydantic import BaseModel, ConfigDict, Field

Source = Literal["amd-smi", "rocm-smi", "nvidia-smi", "dcgm-exporter", "amd-metrics-exporter"]

KIB = 1024
MIB = 1024**2
GIB = 1024**3


class TelemetryParseError(ValueError):
    """Output of ``source`` that cannot be read; ``problem`` says what was wrong."""

    def __init__(self, source: Source, problem: str) -> None:
        super().__init__(f"{source}: {problem}")
        self.source = source
        self.problem = problem


class GpuSample(BaseModel):
    """One reading of one GPU. ``None`` means the tool did not report the value."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: Source = Field(description="The tool whose output the sample was read from.")
    host: str = Field(min_length=1, description="The node the GPU is in.")
    gpu: int = Field(
        ge=0,
        description="GPU index as the tool numbers it: amd-smi `gpu`, rocm-smi `cardN`, "
        "nvidia-smi `index`, dcgm-exporter `gpu`, AMD exporter `gpu_id`.",
    )
    timestamp_s: float = Field(description="Unix time of the reading, seconds.")
    power_w: float | None = Field(
        None,
        description="Board/socket power, W: amd-smi `socket_power`, rocm-smi average or "
        "current socket package power, nvidia-smi `power.draw` (else `.average`, else "
        "`.instant`), DCGM_FI_DEV_POWER_USAGE, AMD exporter gpu_package_power (else "
        "gpu_average_package_power).",
    )
    energy_j: float | None = Field(
        None,
        description="The device's cumulative energy counter, J, counted from an origin of the "
        "driver's (e.g. its last load); only differences are meaningful. None when the tool "
        "does not expose one.",
    )
    gfx_util_pct: float | None = Field(
        None, description="Graphics/compute engine busy, % (amd `gfx_activity`, nvidia GPU util)."
    )
    mem_util_pct: float | None = Field(
        None,
        description="Memory-controller (bandwidth) activity, %: amd `umc_activity`, rocm-smi "
        "`GPU memory use (%)` (mem_busy_percent), nvidia `utilization.memory`, DCGM "
        "MEM_COPY_UTIL. Not memory capacity.",
    )
    mem_used_bytes: int | None = Field(None, description="Device memory in use, bytes.")
    mem_total_bytes: int | None = Field(None, description="Device memory size, bytes.")
    sm_clock_mhz: float | None = Field(
        None,
        description="SM (NVIDIA) or GFX (AMD) clock, MHz; on AMD GPUs with several XCDs the "
        "highest current GFX clock among them.",
    )
    mem_clock_mhz: float | None = Field(None, description="Memory clock, MHz.")
    temp_gpu_c: float | None = Field(
        None, description="NVIDIA's GPU core temperature (temperature.gpu, DCGM GPU_TEMP), °C."
    )
    temp_edge_c: float | None = Field(None, description="AMD edge temperature, °C.")
    temp_hotspot_c: float | None = Field(
        None, description="AMD hotspot (junction) temperature, °C."
    )
    temp_mem_c: float | None = Field(None, description="Memory (HBM/VRAM) temperature, °C.")
    throttle: tuple[str, ...] | None = Field(
        None,
        description="Active throttle/clock-event reasons: () when the tool reports none "
        "active, None when it does not report them. NVIDIA reasons by their nvml.h names.",
    )
    fabric_rx_bytes: float | None = Field(
        None, description="Accumulated xGMI/NVLink bytes received, summed over links."
    )
    fabric_tx_bytes: float | None = Field(
        None, description="Accumulated xGMI/NVLink bytes sent, summed over links."
    )
    pcie_bandwidth_mbps: float | None = Field(
        None, description="Current PCIe bandwidth as the tool reports it, Mb/s."
    )


# --- shared helpers -----------------------------------------------------------------------

_UNAVAILABLE = re.compile(r"^\s*(\[.*\]|N/A.*|)\s*$", re.IGNORECASE)


def _number(source: Source, what: str, raw: Any) -> float | None:
    """A reading as a float; ``None`` for the tool's unavailable markers."""
    if raw is None or isinstance(raw, bool):
        return None
    if isinstance(raw, int | float):
        return float(raw)
    if isinstance(raw, str):
        if _UNAVAILABLE.match(raw):
            return None
        try:
            return float(raw.strip())
        except ValueError:
            pass
    raise TelemetryParseError(source, f"{what}: {raw!r} is not a number")


def _scaled(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor


def _as_bytes(value: float | None) -> int | None:
    return None if value is None else round(value)


def _timestamp(source: Source, found: float | None, given: float | None) -> float:
    if found is not None:
        return found
    if given is None:
        raise TelemetryParseError(
            source, "the output carries no timestamp and none was given (timestamp=...)"
        )
    return given


def _host(source: Source, given: str | None, label: str | None) -> str:
    host = given or label
    if not host:
        raise TelemetryParseError(source, "no host given and no hostname label in the output")
    return host


def _index(source: Source, raw: Any, what: str = "GPU index") -> int:
    if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0:
        return raw
    if isinstance(raw, str) and raw.strip().isdigit():
        return int(raw.strip())
    raise TelemetryParseError(source, f"{what} {raw!r} is not a non-negative integer")


# NVML clock event ("throttle") reason bits, nvml.h nvmlClocksEventReason*; the same bitmask
# is nvidia-smi's clocks_event_reasons.active and DCGM_FI_DEV_CLOCKS_EVENT_REASONS.
NVML_CLOCK_EVENT_REASONS: Mapping[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


def _nvml_reasons(source: Source, raw: Any) -> tuple[str, ...] | None:
    if isinstance(raw, str):
        if _UNAVAILABLE.match(raw):
            return None
        try:
            mask = int(raw.strip(), 0)
        except ValueError:
            raise TelemetryParseError(
                source, f"clock event reasons {raw!r} is not a bitmask"
            ) from None
    elif isinstance(raw, int | float):
        mask = int(raw)
    else:
        return None
    names = [name for bit, name in NVML_CLOCK_EVENT_REASONS.items() if mask & bit]
    unknown = mask & ~sum(NVML_CLOCK_EVENT_REASONS)
    if unknown:
        names.append(f"0x{unknown:x}")
    return tuple(names)


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
    second early, while the sampler knows when it read the document to the millisecond."""
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


# --- nvidia-smi --query-gpu ---------------------------------------------------------------

# The fields the sampler queries, in order; parse_nvidia_smi_csv reads the noheader form by
# this list. clocks_event_reasons.* is the driver-535+ name (earlier: clocks_throttle_reasons).
NVIDIA_SMI_QUERY_FIELDS: tuple[str, ...] = (
    "timestamp",
    "index",
    "power.draw",
    "utilization.gpu",
    "utilization.memory",
    "memory.used",
    "memory.total",
    "clocks.sm",
    "clocks.mem",
    "temperature.gpu",
    "temperature.memory",
    "clocks_event_reasons.active",
)
NVIDIA_SMI_FORMAT = "csv,noheader,nounits"
NVIDIA_SMI_ARGS: tuple[str, ...] = (
    f"--query-gpu={','.join(NVIDIA_SMI_QUERY_FIELDS)}",
    f"--format={NVIDIA_SMI_FORMAT}",
)
# Query names nvidia-smi accepts but prints under another name in the header (nvidia-smi
# --help-query-gpu; e.g. clocks.gr,clocks.mem come back as clocks.current.graphics,
# clocks.current.memory).
_NVIDIA_ALIASES: Mapping[str, str] = {
    "clocks.sm": "clocks.current.sm",
    "clocks.mem": "clocks.current.memory",
    "clocks.gr": "clocks.current.graphics",
    "clocks.video": "clocks.current.video",
    "gpu_name": "name",
    "clocks_throttle_reasons.active": "clocks_event_reasons.active",
}
_NVIDIA_HEADER = re.compile(r"^(?P<name>[^\[]+?)\s*(\[(?P<unit>[^\]]+)\])?$")
# nvidia-smi's timestamp field: local wall time, no zone ("2024/03/15 13:57:59.791").
_NVIDIA_TIME = "%Y/%m/%d %H:%M:%S.%f"


def _nvidia_name(name: str) -> str:
    name = name.strip()
    return _NVIDIA_ALIASES.get(name, name)


def nvidia_smi_rows(text: str, fields: Iterable[str] | None = None) -> list[dict[str, str | None]]:
    """The cells of ``nvidia-smi --query-gpu`` CSV, keyed by field name.

    With ``fields`` the text is the noheader form of that query; without, its first line is
    the header (``power.draw [W]``: the unit in brackets, which cells of the ``csv`` form
    repeat and ``nounits`` omits). Units are stripped, unavailable cells (``[N/A]``, ``N/A``,
    ``[Not Supported]``) are ``None``."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise TelemetryParseError("nvidia-smi", "no output")
    rows = list(csv.reader(io.StringIO("\n".join(lines)), skipinitialspace=True))
    if fields is None:
        header, rows = rows[0], rows[1:]
        names, units = [], []
        for column in header:
            match = _NVIDIA_HEADER.match(column.strip())
            if not match:
                raise TelemetryParseError("nvidia-smi", f"bad header column {column!r}")
            names.append(_nvidia_name(match["name"]))
            units.append(match["unit"])
    else:
        names = [_nvidia_name(field) for field in fields]
        units = [None] * len(names)
    result = []
    for number, row in enumerate(rows, start=1):
        if len(row) != len(names):
            raise TelemetryParseError(
                "nvidia-smi",
                f"row {number} has {len(row)} values for {len(names)} fields "
                f"(truncated, or not the query it is parsed as): {row!r}",
            )
        cells: dict[str, str | None] = {}
        for name, unit, cell in zip(names, units, row, strict=True):
            cell = cell.strip()
            if _UNAVAILABLE.match(cell):
                cells[name] = None
                continue
            if unit and cell.endswith(unit):
                cell = cell[: -len(unit)].rstrip()
            cells[name] = cell
        result.append(cells)
    return result


def _nvidia_time(raw: str | None, tz: tzinfo) -> float | None:
    if raw is None:
        return None
    try:
        return datetime.strptime(raw, _NVIDIA_TIME).replace(tzinfo=tz).timestamp()
    except ValueError:
        raise TelemetryParseError(
            "nvidia-smi", f"timestamp {raw!r} is not {_NVIDIA_TIME}"
        ) from None


def _nvidia_number(row: Mapping[str, str | None], gpu: int, *names: str) -> float | None:
    """The first of ``names`` the row has a value for."""
    for name in names:
        value = _number("nvidia-smi", f"GPU {gpu}: {name}", row.get(name))
        if value is not None:
            return value
    return None


def parse_nvidia_smi_csv(
    text: str,
    *,
    host: str,
    fields: Iterable[str] | None = None,
    timestamp: float | None = None,
    tz: tzinfo = UTC,
) -> list[GpuSample]:
    """``nvidia-smi --query-gpu=...`` CSV; ``fields`` as for :func:`nvidia_smi_rows` (the
    sampler passes :data:`NVIDIA_SMI_QUERY_FIELDS`).

    The ``timestamp`` field is the node's local time without a zone: ``tz`` is that zone (the
    sampler runs nvidia-smi with ``TZ=UTC``). Without the field, ``timestamp`` stamps every row,
    and looped output (``-l``/``-lms``: one GPU in several rows) is refused since its rows
    cannot be told apart in time."""
    rows = nvidia_smi_rows(text, fields)
    if not rows:
        raise TelemetryParseError("nvidia-smi", "a header but no rows")
    if "index" not in rows[0]:
        raise TelemetryParseError("nvidia-smi", "no index field: query index to know the GPU")
    has_time = "timestamp" in rows[0]
    samples = []
    for row in rows:
        gpu = _index("nvidia-smi", row["index"])
        if not has_time and any(s.gpu == gpu for s in samples):
            raise TelemetryParseError(
                "nvidia-smi",
                f"GPU {gpu} appears in several rows without a timestamp field "
                "(looped output needs timestamp in the query)",
            )

        samples.append(
            GpuSample(
                source="nvidia-smi",
                host=host,
                gpu=gpu,
                timestamp_s=_timestamp(
                    "nvidia-smi", _nvidia_time(row.get("timestamp"), tz), timestamp
                ),
                power_w=_nvidia_number(
                    row, gpu, "power.draw", "power.draw.average", "power.draw.instant"
                ),
                gfx_util_pct=_nvidia_number(row, gpu, "utilization.gpu"),
                mem_util_pct=_nvidia_number(row, gpu, "utilization.memory"),
                mem_used_bytes=_as_bytes(_scaled(_nvidia_number(row, gpu, "memory.used"), MIB)),
                mem_total_bytes=_as_bytes(_scaled(_nvidia_number(row, gpu, "memory.total"), MIB)),
                sm_clock_mhz=_nvidia_number(row, gpu, "clocks.current.sm"),
                mem_clock_mhz=_nvidia_number(row, gpu, "clocks.current.memory"),
                temp_gpu_c=_nvidia_number(row, gpu, "temperature.gpu"),
                temp_mem_c=_nvidia_number(row, gpu, "temperature.memory"),
                throttle=_nvml_reasons("nvidia-smi", row.get("clocks_event_reasons.active")),
            )
        )
    return samples


# --- Prometheus exporters -----------------------------------------------------------------


def _prometheus_samples(source: Source, text: str) -> list[tuple[str, Any]]:
    """``(family name, sample)`` pairs. The family's name, not the sample's: prometheus_client
    names a counter's samples ``<family>_total`` even when the exporter did not."""
    try:
        samples = [
            (family.name, s)
            for family in text_string_to_metric_families(text)
            for s in family.samples
        ]
    except (ValueError, IndexError, KeyError, TypeError) as exc:
        raise TelemetryParseError(source, f"not Prometheus text ({exc})") from None
    if not samples:
        raise TelemetryParseError(source, "no samples in the output")
    return samples


class _Fold:
    """Per-GPU accumulation of exporter series into sample fields."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.fields: dict[int, dict[str, Any]] = {}
        self.hosts: dict[int, str] = {}

    def gpu(self, labels: Mapping[str, str], key: str) -> int:
        return _index(self.source, labels.get(key), f"label {key}=")

    def first(self, gpu: int, field: str, value: float | None) -> None:
        self.fields.setdefault(gpu, {}).setdefault(field, value)

    def largest(self, gpu: int, field: str, value: float | None) -> None:
        fields = self.fields.setdefault(gpu, {})
        if value is not None and (fields.get(field) is None or value > fields[field]):
            fields[field] = value
        else:
            fields.setdefault(field, None)

    def samples(self, host: str | None, timestamp: float) -> list[GpuSample]:
        return [
            GpuSample(
                source=self.source,
                host=_host(self.source, host, self.hosts.get(gpu)),
                gpu=gpu,
                timestamp_s=timestamp,
                **fields,
            )
            for gpu, fields in sorted(self.fields.items())
        ]


# dcgm-exporter series -> (sample field, factor); DCGM units per dcgm_fields.h: W, mJ, %, MiB,
# MHz, °C.
_DCGM_GAUGES: Mapping[str, tuple[str, float]] = {
    "DCGM_FI_DEV_POWER_USAGE": ("power_w", 1.0),
    "DCGM_FI_DEV_GPU_UTIL": ("gfx_util_pct", 1.0),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("mem_util_pct", 1.0),
    "DCGM_FI_DEV_SM_CLOCK": ("sm_clock_mhz", 1.0),
    "DCGM_FI_DEV_MEM_CLOCK": ("mem_clock_mhz", 1.0),
    "DCGM_FI_DEV_GPU_TEMP": ("temp_gpu_c", 1.0),
    "DCGM_FI_DEV_MEMORY_TEMP": ("temp_mem_c", 1.0),
}
_DCGM_MEMORY: Mapping[str, str] = {
    "DCGM_FI_DEV_FB_USED": "mem_used_bytes",
    "DCGM_FI_DEV_FB_TOTAL": "mem_total_bytes",
}
_DCGM_ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
_DCGM_REASONS = ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS")
# dcgm_structs.h: a value at or above these is a blank (not found/supported/permitted).
DCGM_INT64_BLANK = 0x7FFFFFFFFFFFFFF0
DCGM_FP64_BLANK = 140737488355328.0


def _dcgm_value(name: str, value: float) -> float | None:
    blank = DCGM_FP64_BLANK if name == "DCGM_FI_DEV_POWER_USAGE" else DCGM_INT64_BLANK
    return None if value >= blank else float(value)


def parse_dcgm_exporter(text: str, *, timestamp: float, host: str | None = None) -> list[GpuSample]:
    """dcgm-exporter's ``/metrics``; ``host`` defaults to the series' ``Hostname`` label."""
    fold = _Fold("dcgm-exporter")
    for name, sample in _prometheus_samples("dcgm-exporter", text):
        labels = sample.labels
        known = name in _DCGM_GAUGES or name in _DCGM_MEMORY or name == _DCGM_ENERGY
        if not (known or name in _DCGM_REASONS):
            continue
        gpu = fold.gpu(labels, "gpu")
        if labels.get("Hostname"):
            fold.hosts.setdefault(gpu, labels["Hostname"])
        value = _dcgm_value(name, sample.value)
        if name in _DCGM_GAUGES:
            field, factor = _DCGM_GAUGES[name]
            fold.first(gpu, field, _scaled(value, factor))
        elif name == _DCGM_ENERGY:
            fold.largest(gpu, "energy_j", _scaled(value, 1e-3))
        elif name in _DCGM_MEMORY:
            # Under MIG each instance reports its own framebuffer, none of them the device's.
            per_instance = "GPU_I_ID" in labels
            fold.first(
                gpu, _DCGM_MEMORY[name], None if per_instance else _as_bytes(_scaled(value, MIB))
            )
        else:
            fold.first(gpu, "throttle", _nvml_reasons("dcgm-exporter", value))
    if not fold.fields:
        raise TelemetryParseError("dcgm-exporter", "no DCGM_FI_DEV_* series this parser reads")
    return fold.samples(host, timestamp)


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
