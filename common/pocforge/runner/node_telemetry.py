"""Telemetry of a cluster run: every node with launches records while its workload runs
(the workload role starts :mod:`pocforge.telemetry.recorder` before the launches, collect.yml
stops it before it fetches), and the controller makes the figures once the files are here:

- each node's series, ``cluster/telemetry/<host>.<serve|train>.jsonl``, parsed from its raw
  file (:func:`pocforge.telemetry.reader.read_raw`), on the node's own clock;
- each node's clock against this machine's, read at each point's start and at training's
  (:class:`ClockHook`, :mod:`pocforge.cluster.clock`) into ``cluster/telemetry/clock.jsonl``:
  a point's window cuts every node's series where that node's clock then stood;
- serving: per point, ``serving/<workload>/telemetry-<point>.jsonl`` holds every node's
  samples over the point with each repeat's window, whose energy over all the deployment's
  GPUs goes into the repeat's metrics (:func:`pocforge.runner.telemetry.point_energy`, as on
  one machine); the points are then judged again (:func:`pocforge.bench.aggregate.rejudge`),
  so a criterion on ``joules_per_token`` is judged on a cluster too;
- training: ``training/telemetry.jsonl``, every node's samples and the run's window.

Telemetry never fails a stage: a node that recorded nothing is a line said, and a point
without samples gets the note every unsampled point gets.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pocforge.bench.aggregate import rejudge
from pocforge.bench.summary import PointSummary, Summary
from pocforge.bench.sweep import PointHook
from pocforge.cluster.clock import ClockReading, node_clocks
from pocforge.runner.telemetry import gpu_hour_price, point_energy, training_windows, window_span
from pocforge.spec import PocSpec
from pocforge.telemetry.reader import read_raw
from pocforge.telemetry.series import Series, line
from pocforge.telemetry.sources import (
    DEFAULT_INTERVAL_S,
    RAW_NAME,
    recorder_plan,
    recorder_script,
)
from pocforge.training.summary import TrainingSummary

Say = Callable[[str], None]


def recorder_vars(kind: str, interval_s: float = DEFAULT_INTERVAL_S) -> dict:
    """The workload role's variables that start the recorder on every node with launches."""
    return {
        "workload_telemetry_recorder": recorder_script(),
        "workload_telemetry_plan": recorder_plan(interval_s, RAW_NAME.format(kind=kind)),
    }


def node_series(run, collected: Path, kind: str, say: Say) -> list[Series]:
    """Each node's recording of ``kind`` among the collected files
    (``<collected>/<host>/<its path>``), written into the run as its series."""
    out, counts = [], []
    name = RAW_NAME.format(kind=kind)
    hosts = sorted(p for p in collected.iterdir() if p.is_dir()) if collected.is_dir() else []
    for folder in hosts:
        for raw in sorted(folder.rglob(name)):
            series = read_raw(raw, folder.name)
            series.write(run.path / "cluster" / "telemetry" / f"{folder.name}.{kind}.jsonl")
            out.append(series)
            counts.append(f"{folder.name} {len(series.gpu)} GPU/{len(series.host)} host")
    if out:
        say(f"telemetry: the nodes' samples: {', '.join(counts)}")
        run.adopt("cluster/telemetry")
    else:
        say("telemetry: no node's recording was collected (see cluster/collected)")
    return out


def _span(series: list[Series], start: float, end: float, margin: float) -> list:
    """Every node's meta, and its samples and problems from ``start - margin`` to
    ``end + margin``, in time order."""
    metas = [s.meta for s in series if s.meta is not None]
    items = [
        item
        for s in series
        for item in (*s.gpu, *s.host, *s.packages, *s.problems)
        if start - margin <= item.timestamp_s <= end + margin
    ]
    items.sort(key=lambda item: item.timestamp_s)
    return [*metas, *items]


CLOCK_FILE = "cluster/telemetry/clock.jsonl"


class ClockHook(PointHook):
    """Read every node's clock at each point's start (see the module notes)."""

    def __init__(self, run, nodes, say: Say) -> None:
        self.run, self.nodes, self.say = run, nodes, say

    def before(self, point: PointSummary) -> None:
        try:
            record_clocks(self.run, self.nodes, point.id, self.say)
        except Exception as exc:  # a clock is extra: the point runs
            self.say(f"telemetry: node clocks not read ({type(exc).__name__}: {exc})")


def record_clocks(run, nodes, label: str, say: Say) -> None:
    """Every node's clock now, appended to the run's clock file (a node that does not
    answer is said: its samples stay on its own clock)."""
    readings, problems = node_clocks(nodes.inventory, nodes.extravars, label)
    path = run.path / CLOCK_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.writelines(r.model_dump_json() + "\n" for r in readings)
    for problem in problems:
        say(f"telemetry: {problem}")
    far = [r for r in readings if abs(r.offset_s) > r.rtt_s / 2]  # beyond what was measurable
    if far:
        off = ", ".join(f"{r.host} {r.offset_s:+.3f} s" for r in far)
        say(f"telemetry: node clocks off this machine's ({off}): samples aligned")


def read_clocks(run) -> list[ClockReading]:
    """The run's clock readings (the file adopted into the run, as read)."""
    path = run.path / CLOCK_FILE
    if not path.is_file():
        return []
    run.adopt(CLOCK_FILE)
    return [ClockReading.model_validate_json(x) for x in path.read_text().splitlines() if x]


def aligned(series: list[Series], clocks: list[ClockReading], label: str) -> list[Series]:
    """Every node's series on this machine's clock, by the offset read for ``label`` (a
    point's id, 'training'), else the node's latest reading; as stamped without one."""
    out = []
    for s in series:
        host = s.meta.host if s.meta else None
        mine = [c for c in clocks if c.host == host]
        chosen = [c for c in mine if c.label == label] or mine[-1:]
        out.append(s.shifted(chosen[0].offset_s) if chosen else s)
    return out


def _merged(series: list[Series]) -> tuple[list, list, float]:
    """Every node's GPU and CPU package samples, and the longest sampling interval."""
    gpu = [g for s in series for g in s.gpu]
    packages = [p for s in series for p in s.packages]
    return gpu, packages, max((s.interval_s for s in series), default=DEFAULT_INTERVAL_S)


def serving_energy(spec: PocSpec, run, series: list[Series], say: Say) -> None:
    """Every workload's points measured over the nodes' samples (see the module notes)."""
    clocks = read_clocks(run)
    price = gpu_hour_price(spec)
    for workload in spec.serving.workloads:
        folder = run.path / "serving" / workload.name
        path = folder / "summary.json"
        if not path.is_file():
            continue
        summary = Summary.model_validate_json(path.read_text())
        for point in summary.points:
            nodes = aligned(series, clocks, point.id)
            gpu, packages, interval = _merged(nodes)
            windows = point_energy(
                point,
                gpu,
                packages,
                sampled=bool(series),
                interval_s=interval,
                gpus=spec.cluster.total_gpus,
                price=price,
            )
            span = window_span(point)
            if series and span is not None:
                telemetry = folder / f"telemetry-{point.id}.jsonl"
                items = [*_span(nodes, *span, 2 * interval), *windows]
                telemetry.write_text("".join(line(item) for item in items), encoding="utf-8")
                point.telemetry_file = telemetry.name
                run.adopt(telemetry.relative_to(run.path), stage="serving")
        rejudge(summary, folder)
        run.adopt(path.relative_to(run.path), stage="serving")
        say(f"telemetry: {workload.name}: energy of {len(summary.points)} points over the nodes")


def training_energy(spec: PocSpec, run, series: list[Series], start: float, end: float,
                    say: Say, summary: TrainingSummary | None = None) -> None:  # fmt: skip
    """``training/telemetry.jsonl``: every node's samples over the run, its window and its
    measured steps' (from rank 0's ``summary``). Called inside the training stage, whose
    end records the file."""
    if not series:
        return
    series = aligned(series, read_clocks(run), "training")
    gpu, packages, interval = _merged(series)
    windows = training_windows(
        gpu,
        packages,
        start,
        end,
        summary,
        interval_s=interval,
        gpus=spec.cluster.total_gpus,
        say=say,
        where=f" on {len(series)} nodes",
    )
    items = [*_span(series, start, end, 2 * interval), *windows]
    path = run.path / "training" / "telemetry.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line(item) for item in items), encoding="utf-8")
