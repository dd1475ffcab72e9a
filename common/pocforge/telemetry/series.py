"""A telemetry series: the kit's parsed telemetry file (its lines' models, read and written),
and the energy of a measured window in it. The recorder's raw file becomes one in
:mod:`pocforge.telemetry.reader`.

A series file holds one JSON object a line, each with a ``kind``: ``meta`` (first: the host,
the interval, the sources used and why others were not), ``gpu`` (a
:class:`~pocforge.telemetry.parsers.GpuSample`), ``host`` (a
:class:`~pocforge.telemetry.host.HostSample`), ``rapl`` (a
:class:`~pocforge.telemetry.host.PackageSample`), ``problem`` (a source's failure),
``window`` (a measured window and its energy) and ``end`` (last: what recording cost).

Which devices a window's energy is of: the node's GPUs when a GPU source reported any,
else its CPU packages (RAPL), else none (the figures are absent, and :func:`window`
says why). Per device the energy counter is tried first (the samples that carry one),
then the power readings (the samples that carry one): amd-smi's categories arrive as
separate samples, so a power sample need not carry the counter.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pocforge.telemetry.energy import (
    EnergyEstimate,
    PointEnergy,
    Reading,
    point_energy,
    window_energy,
)
from pocforge.telemetry.host import HostSample, PackageSample
from pocforge.telemetry.parsers import GpuSample


class SourceInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="host, amd-smi, amd-metrics-exporter, rocm-smi, nvidia-smi…")
    detail: str = ""
    command: list[str] | None = None
    url: str | None = None


class Meta(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["meta"] = "meta"
    host: str
    interval_s: float
    started_s: float
    sources: list[SourceInfo]
    not_used: list[str] = Field(
        default_factory=list, description="Sources looked for and why they were not used."
    )


class Problem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["problem"] = "problem"
    source: str
    timestamp_s: float
    message: str


class SourceCost(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str
    samples: int
    cpu_s: float = Field(description="CPU time of the recorder's thread for this source.")
    tool_cpu_s: float | None = Field(
        None, description="CPU time of the tool's process (looping sources), where readable."
    )


class End(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["end"] = "end"
    stopped_s: float
    wall_s: float
    cost: list[SourceCost]

    @property
    def cpu_pct_of_core(self) -> float:
        """The recorder's CPU (its threads and the tools' processes) / wall time, %."""
        spent = sum(c.cpu_s + (c.tool_cpu_s or 0.0) for c in self.cost)
        return 100.0 * spent / self.wall_s if self.wall_s > 0 else 0.0


# a sample's line names its kind; the other lines' models carry their own
SAMPLE_KINDS = {"GpuSample": "gpu", "HostSample": "host", "PackageSample": "rapl"}


def line(item: BaseModel) -> str:
    """One line of a series file (what :meth:`Series.read` reads)."""
    data = item.model_dump(mode="json", exclude_none=True)
    kind = SAMPLE_KINDS.get(type(item).__name__)
    if kind is not None:
        data = {"kind": kind, **data}
    return json.dumps(data, separators=(",", ":")) + "\n"


class Window(BaseModel):
    """A measured window of the benchmark and what the telemetry says it cost."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["window"] = "window"
    label: str = Field(description="What ran: 'repeat 0', 'training'.")
    repeat: int | None = Field(None, description="The sweep point's repeat it measured.")
    start_s: float
    end_s: float
    output_tokens: int | None = None
    devices: Literal["gpu", "cpu-package"] | None = Field(
        None, description="What the energy is of; None: no power source on the node."
    )
    energy: PointEnergy | None = None
    problem: str | None = Field(None, description="Why there are no energy figures.")


@dataclass
class Series:
    """One telemetry file, sorted by time; a damaged line is skipped and counted."""

    meta: Meta | None = None
    gpu: list[GpuSample] = field(default_factory=list)
    host: list[HostSample] = field(default_factory=list)
    packages: list[PackageSample] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    windows: list[Window] = field(default_factory=list)
    end: End | None = None
    unreadable: int = 0

    @classmethod
    def read(cls, path: Path) -> Series:
        series = cls()
        lists: dict[str, tuple[list, type[BaseModel]]] = {
            "gpu": (series.gpu, GpuSample),
            "host": (series.host, HostSample),
            "rapl": (series.packages, PackageSample),
            "problem": (series.problems, Problem),
            "window": (series.windows, Window),
        }
        for text in Path(path).read_text(encoding="utf-8").splitlines():
            if not text.strip():
                continue
            try:
                data = json.loads(text)
                kind = data.pop("kind")
                if kind == "meta":
                    series.meta = Meta.model_validate(data)
                elif kind == "end":
                    series.end = End.model_validate(data)
                elif kind in lists:
                    target, model = lists[kind]
                    target.append(model.model_validate(data))
                else:
                    series.unreadable += 1
            except (ValueError, KeyError, TypeError, AttributeError, ValidationError):
                series.unreadable += 1  # a line cut by a killed writer, or another kind
        for samples in (series.gpu, series.host, series.packages):
            samples.sort(key=lambda s: s.timestamp_s)
        return series

    def write(self, path: Path) -> Path:
        """The series as the kit keeps it: its meta, the samples and problems in time
        order, its windows, its end (what :meth:`read` reads back)."""
        samples: list[BaseModel] = [*self.gpu, *self.host, *self.packages, *self.problems]
        samples.sort(key=lambda item: item.timestamp_s)  # type: ignore[attr-defined]
        items = [*([self.meta] if self.meta else []), *samples, *self.windows]
        items += [self.end] if self.end else []
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(line(item) for item in items), encoding="utf-8")
        return path

    def shifted(self, by_s: float) -> Series:
        """The series on another clock: every time ``by_s`` earlier (a node's clock read
        ``by_s`` ahead of the controller's, :mod:`pocforge.cluster.clock`)."""
        if not by_s:
            return self

        def move(items: list) -> list:
            return [i.model_copy(update={"timestamp_s": i.timestamp_s - by_s}) for i in items]

        meta = self.meta
        if meta is not None:
            meta = meta.model_copy(update={"started_s": meta.started_s - by_s})
        return Series(meta=meta, gpu=move(self.gpu), host=move(self.host),
                      packages=move(self.packages), problems=move(self.problems),
                      windows=list(self.windows), end=self.end,
                      unreadable=self.unreadable)  # fmt: skip

    @property
    def interval_s(self) -> float:
        return self.meta.interval_s if self.meta else 1.0

    @property
    def sources(self) -> list[str]:
        """The sources recorded and those its samples name."""
        named = {s.name for s in self.meta.sources} if self.meta else set()
        named |= {s.source for s in (*self.gpu, *self.host, *self.packages)}
        return sorted(named)


def _by_device(samples: Sequence[Reading]) -> dict[tuple[str, int], list[Reading]]:
    out: dict[tuple[str, int], list[Reading]] = defaultdict(list)
    for s in samples:
        out[(s.host, s.gpu)].append(s)
    return dict(sorted(out.items()))


def device_estimate(
    samples: Sequence[Reading], start_s: float, end_s: float, *, interval_s: float, device: str
) -> EnergyEstimate:
    """One device's energy: its counter samples first, else its power samples."""
    counted = [s for s in samples if s.energy_j is not None]
    notes = []
    if counted:
        est = window_energy(counted, start_s, end_s, interval_s=interval_s, device=device)
        if est.valid and est.method == "counter":
            return est
        notes.append(est.counter_note or est.reason)
    powered = [s for s in samples if s.power_w is not None]
    est = window_energy(
        powered or list(samples), start_s, end_s, interval_s=interval_s, device=device
    )
    if notes and est.counter_note is None:
        est = est.model_copy(update={"counter_note": "; ".join(n for n in notes if n)})
    return est


def window(
    gpu: Sequence[GpuSample],
    packages: Sequence[PackageSample],
    start_s: float,
    end_s: float,
    *,
    interval_s: float,
    output_tokens: int,
    gpu_count: int,
    gpu_hour_usd: float | None = None,
    label: str = "window",
    repeat: int | None = None,
) -> Window:
    """The window's energy over the node's GPUs (``gpu_count`` of them serve it), else its
    CPU packages (all of them), else none."""
    base = Window(
        label=label, repeat=repeat, start_s=start_s, end_s=end_s, output_tokens=output_tokens
    )
    if gpu:
        devices, name, count = _by_device(gpu), "GPU", gpu_count
    elif packages:
        devices, name, count = _by_device(packages), "CPU package", len(_by_device(packages))
    else:
        return base.model_copy(
            update={"problem": "no power source on the node (no GPU tool, no readable RAPL)"}
        )
    estimates = [
        device_estimate(s, start_s, end_s, interval_s=interval_s, device=name)
        for s in devices.values()
    ]
    energy = point_energy(
        estimates, output_tokens=output_tokens, gpu_count=count, gpu_hour_usd=gpu_hour_usd
    )
    return base.model_copy(
        update={
            "devices": "gpu" if name == "GPU" else "cpu-package",
            "energy": energy,
            "problem": None if energy.valid else energy.reason,
        }
    )
