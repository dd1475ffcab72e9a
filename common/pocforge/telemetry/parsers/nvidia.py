"""NVIDIA's telemetry tools: ``nvidia-smi --query-gpu`` CSV and dcgm-exporter's Prometheus
text (:mod:`pocforge.telemetry.parsers` says the conventions)."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, tzinfo

from pocforge.telemetry.parsers.sample import (
    _UNAVAILABLE,
    MIB,
    GpuSample,
    TelemetryParseError,
    _as_bytes,
    _Fold,
    _index,
    _number,
    _nvml_reasons,
    _prometheus_samples,
    _scaled,
    _timestamp,
)

# --- nvidia-smi --query-gpu ---------------------------------------------------------------

# The fields the recorder queries, in order; parse_nvidia_smi_csv reads the noheader form by
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
    recorder passes :data:`NVIDIA_SMI_QUERY_FIELDS`).

    The ``timestamp`` field is the node's local time without a zone: ``tz`` is that zone (the
    recorder runs nvidia-smi with ``TZ=UTC``). Without the field, ``timestamp`` stamps every row,
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
    # profiling fields (dcgm_fields.h, DCGM user guide "Profiling Metrics"): rates in B/s over
    # DCGM's own sampling window; NVLink payload without protocol headers, PCIe with them
    "DCGM_FI_PROF_NVLINK_TX_BYTES": ("fabric_tx_bytes_per_s", 1.0),
    "DCGM_FI_PROF_NVLINK_RX_BYTES": ("fabric_rx_bytes_per_s", 1.0),
    "DCGM_FI_PROF_PCIE_TX_BYTES": ("pcie_tx_bytes_per_s", 1.0),
    "DCGM_FI_PROF_PCIE_RX_BYTES": ("pcie_rx_bytes_per_s", 1.0),
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
