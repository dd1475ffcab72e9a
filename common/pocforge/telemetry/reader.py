"""The recorder's raw file as a telemetry series: the one place each tool's output is parsed.

The recorder (:mod:`pocforge.telemetry.recorder`, standard library only) writes what each
source printed, stamped with the time it was read, on a cluster node as on this machine;
here each record goes through the parser tested on real captures of its tool
(:mod:`pocforge.telemetry.parsers`), the host's ``/proc`` readings become utilisation and
memory, and each CPU package's RAPL counter becomes energy (its wraps undone) and power
(the difference from its previous reading). A sample is named by the host the caller
gives (a node's inventory name: the nodes of a rehearsal share one kernel's host name) and
stamped with the recording machine's clock.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC
from pathlib import Path

from pocforge.telemetry.host import (
    CpuTimes,
    PackageSample,
    RaplCounter,
    host_sample,
    parse_proc_stat,
)
from pocforge.telemetry.parsers import (
    NVIDIA_SMI_QUERY_FIELDS,
    GpuSample,
    TelemetryParseError,
    parse_amd_metrics_exporter,
    parse_amd_smi_metric_json,
    parse_dcgm_exporter,
    parse_nvidia_smi_csv,
    parse_rocm_smi_json,
)
from pocforge.telemetry.series import End, Meta, Problem, Series, SourceCost, SourceInfo

AMD_SMI_BANNER = "CTRL"  # watch mode's "'CTRL' + 'C' to stop watching output:" line


def _nvidia_smi(text: str, host: str, now: float) -> list[GpuSample]:
    return parse_nvidia_smi_csv(text, host=host, fields=NVIDIA_SMI_QUERY_FIELDS, tz=UTC)


def _amd_smi(text: str, host: str, now: float) -> list[GpuSample]:
    # stamped when the recorder read the document, not with amd-smi's whole-second time
    return parse_amd_smi_metric_json(text, host=host, timestamp=now, output_time=False)


def _rocm_smi(text: str, host: str, now: float) -> list[GpuSample]:
    start = text.find("{")  # rocm-smi may print warnings before its JSON
    return parse_rocm_smi_json(text[start:] if start >= 0 else text, host=host, timestamp=now)


def _amd_exporter(text: str, host: str, now: float) -> list[GpuSample]:
    return parse_amd_metrics_exporter(text, timestamp=now, host=host)


def _dcgm_exporter(text: str, host: str, now: float) -> list[GpuSample]:
    return parse_dcgm_exporter(text, timestamp=now, host=host)


# a source's name -> its parser of one raw record's text
PARSERS: dict[str, Callable[[str, str, float], list[GpuSample]]] = {
    "nvidia-smi": _nvidia_smi,
    "amd-smi": _amd_smi,
    "rocm-smi": _rocm_smi,
    "amd-metrics-exporter": _amd_exporter,
    "dcgm-exporter": _dcgm_exporter,
}


class _Reading:
    """The state of one file while it is read: the host's utilisation and RAPL power are
    differences from the previous reading."""

    def __init__(self, host: str | None) -> None:
        self.name = host
        self.out = Series()
        self.cpus = 0
        self.stat: CpuTimes | None = None
        self.counters: dict[int, RaplCounter] = {}
        self.previous: dict[int, tuple[float, float]] = {}
        self.counts: dict[str, int] = defaultdict(int)

    def problem(self, source: str, t: float, message: str) -> None:
        self.out.problems.append(Problem(source=source, timestamp_s=t, message=message))

    def meta(self, item: dict) -> None:
        self.cpus = int(item.get("cpus") or 0)
        self.name = self.name or item["host"]
        self.out.meta = Meta(
            host=self.name,
            interval_s=float(item["interval_s"]),
            started_s=float(item["started_s"]),
            sources=[SourceInfo.model_validate(s) for s in item.get("sources", [])],
            not_used=list(item.get("not_used", [])),
        )

    def raw(self, item: dict) -> None:
        source, t, text = item["source"], float(item["t"]), item["text"]
        if item.get("skipped"):  # text between a tool's JSON documents
            if AMD_SMI_BANNER not in text:
                self.problem(source, t, f"{source}: not JSON: {text[:200]}")
            return
        parse = PARSERS.get(source)
        if parse is None:
            self.out.unreadable += 1
            return
        try:
            found = parse(text, self.name or "?", t)
        except (TelemetryParseError, ValueError) as exc:
            self.problem(source, t, str(exc)[:300])
            return
        self.counts[f"{source} {item.get('detail', '')}".strip()] += len(found)
        self.out.gpu.extend(found)

    def host(self, item: dict) -> None:
        t = float(item["t"])
        stat = parse_proc_stat(item["stat"])
        stat = CpuTimes(busy=stat.busy, total=stat.total, cpus=self.cpus)
        name = self.name or "?"
        self.out.host.append(host_sample(name, t, stat, self.stat, item.get("meminfo", "")))
        self.stat = stat
        self.counts["host"] += 1
        for key, max_uj in (item.get("rapl_max_uj") or {}).items():
            self.counters[int(key)] = RaplCounter(int(max_uj))
        for key, raw_uj in (item.get("rapl") or {}).items():
            package = int(key)
            counter = self.counters.get(package)
            if counter is None:
                continue
            energy = counter.add(int(raw_uj))
            power = None
            if package in self.previous and t > self.previous[package][0]:
                t0, e0 = self.previous[package]
                power = (energy - e0) / (t - t0)
            self.previous[package] = (t, energy)
            self.out.packages.append(
                PackageSample(
                    host=name, package=package, timestamp_s=t, energy_j=energy, power_w=power
                )
            )

    def end(self, item: dict) -> None:
        cost = [
            SourceCost(
                source=c["source"],
                samples=self.counts[c["source"]],
                cpu_s=float(c.get("cpu_s") or 0.0),
                tool_cpu_s=c.get("tool_cpu_s"),
            )
            for c in item.get("cost", [])
        ]
        self.out.end = End(
            stopped_s=float(item["stopped_s"]), wall_s=float(item["wall_s"]), cost=cost
        )


def read_raw(path: Path, host: str | None = None) -> Series:
    """A recorder's file as its series, its samples named ``host`` (default: the host the
    recorder named). A line cut by a node that died, or one no parser takes, is counted in
    ``unreadable``, never fatal."""
    reading = _Reading(host)
    for text in Path(path).read_text(encoding="utf-8", errors="replace").splitlines():
        if not text.strip():
            continue
        try:
            item = json.loads(text)
            kind = item["kind"]
            if kind == "meta":
                reading.meta(item)
            elif kind == "raw":
                reading.raw(item)
            elif kind == "host":
                reading.host(item)
            elif kind == "problem":
                reading.problem(item["source"], float(item["t"]), item["message"])
            elif kind == "end":
                reading.end(item)
            else:
                reading.out.unreadable += 1
        except (ValueError, KeyError, TypeError):
            reading.out.unreadable += 1
    for samples in (reading.out.gpu, reading.out.host, reading.out.packages):
        samples.sort(key=lambda s: s.timestamp_s)
    return reading.out
