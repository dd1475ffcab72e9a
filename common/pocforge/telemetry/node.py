"""Telemetry of cluster nodes: the plan their recorder runs on, and its raw file as a series.

A cluster node records raw (:mod:`pocforge.telemetry.recorder`, standard library only); the
controller turns each node's file into the kit's telemetry series here, with the same
parsers and the same sources, in the same order, as the sampler that runs on this machine
(:func:`pocforge.telemetry.sampler.detect`). A sample is named by the node's inventory name
(the nodes of a rehearsal share one kernel's host name), and stamped with the node's clock
(the controller's windows compare with it: the nodes' clocks are as good as their NTP).
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import UTC
from importlib import resources
from pathlib import Path
from typing import Any

from pocforge.telemetry.host import (
    CpuTimes,
    PackageSample,
    RaplCounter,
    RaplZone,
    host_sample,
    parse_proc_stat,
)
from pocforge.telemetry.parsers import (
    NVIDIA_SMI_ARGS,
    NVIDIA_SMI_QUERY_FIELDS,
    GpuSample,
    TelemetryParseError,
    parse_amd_smi_metric_json,
    parse_nvidia_smi_csv,
)
from pocforge.telemetry.recorder import TOOL_DIRS
from pocforge.telemetry.sampler import (
    AMD_EXPORTER_URL,
    AMD_SMI_CATEGORIES,
    DCGM_EXPORTER_URL,
    POLLED_PARSERS,
    ROCM_SMI_ARGS,
    End,
    Meta,
    Problem,
    SourceCost,
    SourceInfo,
    json_documents,
)
from pocforge.telemetry.series import Series

RAW_NAME = "telemetry.{kind}.raw.jsonl"  # in the node's workdir, beside its launches


def recorder_script() -> str:
    """The recorder the workload role copies to every node (this kit's own file)."""
    return str(resources.files("pocforge.telemetry").joinpath("recorder.py"))


def recorder_plan(interval_s: float, out: str) -> dict[str, Any]:
    """The recorder's plan: per vendor the sources in the order the sampler tries them."""
    seconds = str(max(1, round(interval_s)))  # amd-smi's --watch takes whole seconds
    ms = str(max(1, round(interval_s * 1000)))
    amd = [
        {
            "vendor": "AMD",
            "name": "amd-smi",
            "tool": "amd-smi",
            "mode": "loop",
            "argvs": [
                {"args": ["metric", f"--{c}", "--json", "--watch", seconds], "detail": c}
                for c in AMD_SMI_CATEGORIES
            ],
        },
        {
            "vendor": "AMD",
            "name": "amd-metrics-exporter",
            "url": AMD_EXPORTER_URL,
            "mode": "scrape",
        },
        {
            "vendor": "AMD",
            "name": "rocm-smi",
            "tool": "rocm-smi",
            "mode": "poll",
            "argvs": [{"args": list(ROCM_SMI_ARGS)}],
        },
    ]
    nvidia = [
        {
            "vendor": "NVIDIA",
            "name": "nvidia-smi",
            "tool": "nvidia-smi",
            "mode": "loop",
            "env": {"TZ": "UTC"},
            "argvs": [{"args": [*NVIDIA_SMI_ARGS, "-lms", ms]}],
        },
        {"vendor": "NVIDIA", "name": "dcgm-exporter", "url": DCGM_EXPORTER_URL, "mode": "scrape"},
    ]
    return {
        "out": out,
        "interval_s": interval_s,
        "chains": [amd, nvidia],
        "tool_dirs": list(TOOL_DIRS),
    }


class _Parse:
    """The state of one node's file while it is read: amd-smi's documents span lines, the
    host's utilisation and RAPL power are differences from the previous reading."""

    def __init__(self, host: str) -> None:
        self.name = host  # the inventory's name of the node
        self.out = Series()
        self.cpus = 0
        self.buffers: dict[str, str] = defaultdict(str)
        self.stat: CpuTimes | None = None
        self.counters: dict[int, RaplCounter] = {}
        self.previous: dict[int, tuple[float, float]] = {}
        self.counts: dict[str, int] = defaultdict(int)

    def problem(self, source: str, t: float, message: str) -> None:
        self.out.problems.append(Problem(source=source, timestamp_s=t, message=message))

    def meta(self, item: dict) -> None:
        self.cpus = int(item.get("cpus") or 0)
        self.out.meta = Meta(
            host=self.name,
            interval_s=float(item["interval_s"]),
            started_s=float(item["started_s"]),
            sources=[SourceInfo.model_validate(s) for s in item.get("sources", [])],
            not_used=list(item.get("not_used", [])),
        )

    def raw(self, item: dict) -> None:
        source, t, text = item["source"], float(item["t"]), item["text"]
        try:
            if source == "nvidia-smi":
                found = parse_nvidia_smi_csv(
                    text, host=self.name, fields=NVIDIA_SMI_QUERY_FIELDS, tz=UTC
                )
            elif source == "amd-smi":
                found = self._amd_smi(item.get("detail", ""), t, text)
            elif source in POLLED_PARSERS:
                found = POLLED_PARSERS[source](text, self.name, t)
            else:
                self.out.unreadable += 1
                return
        except (TelemetryParseError, ValueError) as exc:
            self.problem(source, t, str(exc)[:300])
            return
        self.counts[source] += len(found)
        self.out.gpu.extend(found)

    def _amd_smi(self, detail: str, t: float, text: str) -> list[GpuSample]:
        docs, self.buffers[detail], skipped = json_documents(self.buffers[detail] + text)
        for rest in skipped:
            if "CTRL" not in rest:  # watch mode's banner is expected
                self.problem("amd-smi", t, f"amd-smi: not JSON: {rest[:200]}")
        found: list[GpuSample] = []
        for doc in docs:  # stamped when the line that completed it was read
            found += parse_amd_smi_metric_json(
                json.dumps(doc), host=self.name, timestamp=t, output_time=False
            )
        return found

    def host(self, item: dict) -> None:
        t = float(item["t"])
        stat = parse_proc_stat(item["stat"])
        stat = CpuTimes(busy=stat.busy, total=stat.total, cpus=self.cpus)
        sample = host_sample(self.name, t, stat, self.stat, item.get("meminfo", ""))
        self.out.host.append(sample)
        self.stat = stat
        self.counts["host"] += 1
        for key, max_uj in (item.get("rapl_max_uj") or {}).items():
            zone = RaplZone(package=int(key), path=Path("/"), max_range_uj=int(max_uj))
            self.counters[int(key)] = RaplCounter(zone)
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
                    host=self.name,
                    package=package,
                    timestamp_s=t,
                    energy_j=energy,
                    power_w=power,
                )
            )

    def end(self, item: dict) -> None:
        # the recorder's own process (its threads and writes, read by os.times), then each
        # looping tool's process
        own = float(item.get("cpu_s") or 0.0)
        cost = [SourceCost(source="recorder", samples=self.counts["host"], cpu_s=own)]
        cost += [
            SourceCost(
                source=key, samples=self.counts[key.split(" ", 1)[0]], cpu_s=0.0, tool_cpu_s=cpu
            )
            for key, cpu in (item.get("tool_cpu_s") or {}).items()
        ]
        self.out.end = End(
            stopped_s=float(item["stopped_s"]), wall_s=float(item["wall_s"]), cost=cost
        )


def series_from_raw(path: Path, host: str) -> Series:
    """A node's recorder file as its series, its samples named ``host``. A line cut by a
    node that died, or one no parser takes, is counted in ``unreadable``, never fatal."""
    parse = _Parse(host)
    for text in Path(path).read_text(encoding="utf-8", errors="replace").splitlines():
        if not text.strip():
            continue
        try:
            item = json.loads(text)
            kind = item["kind"]
            if kind == "meta":
                parse.meta(item)
            elif kind == "raw":
                parse.raw(item)
            elif kind == "host":
                parse.host(item)
            elif kind == "problem":
                parse.problem(item["source"], float(item["t"]), item["message"])
            elif kind == "end":
                parse.end(item)
            else:
                parse.out.unreadable += 1
        except (ValueError, KeyError, TypeError):
            parse.out.unreadable += 1
    for samples in (parse.out.gpu, parse.out.host, parse.out.packages):
        samples.sort(key=lambda s: s.timestamp_s)
    return parse.out
