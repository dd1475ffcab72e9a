"""The host's own readings as the recorder took them (:mod:`pocforge.telemetry.recorder`):
CPU utilisation and memory from ``/proc``, CPU package energy from the kernel's powercap
(RAPL) interface.

- ``/proc/stat``'s first line holds the CPU time of all CPUs in USER_HZ ticks: ``cpu user
  nice system idle iowait irq softirq steal guest guest_nice`` (proc(5)); ``guest`` and
  ``guest_nice`` are already inside ``user`` and ``nice``, so they are not added again.
  Utilisation between two readings = 1 − Δ(idle + iowait) / Δ(total): a share of all CPUs,
  100 % when every CPU was busy.
- ``/proc/meminfo``: memory in use = ``MemTotal − MemAvailable`` (the kernel's estimate of
  what could be given to a new program without swapping), in bytes (the file says kB,
  meaning KiB).
- ``/sys/class/powercap/intel-rapl:<n>/`` (Documentation/power/powercap/powercap.rst; the
  same zones on AMD Zen CPUs, whose RAPL the kernel's ``intel_rapl`` driver also serves)
  holds each CPU package's ``energy_uj`` counter, µJ, wrapping at ``max_energy_range_uj``.
  Only top-level zones named ``package-<n>`` are read: their subzones (core, uncore, dram)
  are parts of them, and ``psys`` (the whole platform, on some laptops) overlaps them.
  Since Linux 5.10 ``energy_uj`` is readable by root only (CVE-2020-8694): a zone that
  cannot be read is reported, never estimated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class HostSample(BaseModel):
    """One reading of the node itself (not of its GPUs)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: Literal["host"] = "host"
    host: str = Field(min_length=1)
    timestamp_s: float = Field(description="Unix time of the reading, seconds.")
    cpu_util_pct: float | None = Field(
        None,
        description="Busy share of all CPUs since the previous reading, % (100: every CPU "
        "busy); None for the first reading.",
    )
    cpu_count: int | None = Field(None, description="CPUs /proc/stat lists.")
    mem_used_bytes: int | None = Field(None, description="MemTotal - MemAvailable, bytes.")
    mem_total_bytes: int | None = None


class PackageSample(BaseModel):
    """One reading of a CPU package's RAPL energy counter."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: Literal["rapl"] = "rapl"
    host: str = Field(min_length=1)
    package: int = Field(ge=0, description="N of the zone's name package-N.")
    timestamp_s: float
    energy_j: float = Field(
        description="Energy since the recorder's first reading, J, the counter's wraps undone."
    )
    power_w: float | None = Field(
        None, description="Average power since the previous reading, W (None for the first)."
    )

    @property
    def gpu(self) -> int:
        """The package index under the name :func:`pocforge.telemetry.energy.window_energy`
        keys a device by."""
        return self.package


@dataclass(frozen=True)
class CpuTimes:
    busy: int
    total: int
    cpus: int


def parse_proc_stat(text: str) -> CpuTimes:
    """The aggregate ``cpu`` line of ``/proc/stat`` and the number of ``cpuN`` lines."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith("cpu "):
        raise ValueError("/proc/stat: no aggregate 'cpu' line first")
    fields = [int(v) for v in lines[0].split()[1:]]
    fields += [0] * (10 - len(fields))  # kernels before 2.6.33 print fewer columns
    user, nice, system, idle, iowait, irq, softirq, steal = fields[:8]
    total = user + nice + system + idle + iowait + irq + softirq + steal
    cpus = sum(1 for line in lines[1:] if re.match(r"cpu\d+\s", line))
    return CpuTimes(busy=total - idle - iowait, total=total, cpus=cpus)


def cpu_util_pct(before: CpuTimes, after: CpuTimes) -> float | None:
    """Busy share of all CPUs between two readings, %; None when no tick passed."""
    elapsed = after.total - before.total
    if elapsed <= 0:
        return None
    return 100.0 * (after.busy - before.busy) / elapsed


def parse_meminfo(text: str) -> tuple[int | None, int | None]:
    """(used, total) bytes from ``/proc/meminfo``: MemTotal − MemAvailable, MemTotal."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        match = re.match(r"(\w+):\s+(\d+)\s*kB", line)
        if match:
            values[match.group(1)] = int(match.group(2)) * 1024
    total = values.get("MemTotal")
    available = values.get("MemAvailable")
    used = total - available if total is not None and available is not None else None
    return used, total


class RaplCounter:
    """One package's counter, its wraps undone: energy since the first reading, J."""

    def __init__(self, max_range_uj: int) -> None:
        self.max_range_uj = max_range_uj  # the zone's max_energy_range_uj
        self._first: int | None = None
        self._last: int | None = None
        self._wraps = 0

    def add(self, raw_uj: int) -> float:
        """Take a raw ``energy_uj`` value; the energy since the first, J. A value below the
        previous one is a wrap (the counter counts up from 0 after ``max_energy_range_uj``):
        between two readings a second apart a package cannot spend the whole range (about
        262 kJ on common parts)."""
        if self._first is None:
            self._first = raw_uj
        elif self._last is not None and raw_uj < self._last:
            self._wraps += 1
        self._last = raw_uj
        total = raw_uj + self._wraps * (self.max_range_uj + 1) - self._first
        return total * 1e-6


def host_sample(
    host: str, timestamp: float, stat: CpuTimes, previous: CpuTimes | None, meminfo: str
) -> HostSample:
    used, total = parse_meminfo(meminfo)
    return HostSample(
        host=host,
        timestamp_s=timestamp,
        cpu_util_pct=cpu_util_pct(previous, stat) if previous else None,
        cpu_count=stat.cpus or None,
        mem_used_bytes=used,
        mem_total_bytes=total,
    )
