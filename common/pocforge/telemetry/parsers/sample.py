"""The normalized per-GPU sample every telemetry parser returns, its error, and the helpers
the parsers share (numbers, units, indexes, NVML reasons, Prometheus text)."""

from __future__ import annotations

import re
from collections.abc import Mapping
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
    fabric_tx_bytes_per_s: float | None = Field(
        None, description="NVLink/xGMI data sent, bytes per second over the tool's own window."
    )
    fabric_rx_bytes_per_s: float | None = Field(
        None, description="NVLink/xGMI data received, bytes per second."
    )
    pcie_tx_bytes_per_s: float | None = Field(
        None, description="PCIe data sent (headers included), bytes per second."
    )
    pcie_rx_bytes_per_s: float | None = Field(
        None, description="PCIe data received (headers included), bytes per second."
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
