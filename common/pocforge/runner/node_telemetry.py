"""Telemetry of a cluster run: every node with launches records while its workload runs
(the workload role starts :mod:`pocforge.telemetry.recorder` before the launches, collect.yml
stops it before it fetches), and the controller makes the figures once the files are here:

- each node's series, ``cluster/telemetry/<host>.<serve|train>.jsonl``, parsed from its raw
  file (:func:`pocforge.telemetry.reader.read_raw`);
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
from pocforge.bench.summary import Summary
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


def _merged(series: list[Series]) -> tuple[list, list, float]:
    """Every node's GPU and CPU package samples, and the longest sampling interval."""
    gpu = [g for s in series for g in s.gpu]
    packages = [p for s in series for p in s.packages]
    return gpu, packages, max((s.interval_s for s in series), default=DEFAULT_INTERVAL_S)


def serving_energy(spec: PocSpec, run, series: list[Series], say: Say) -> None:
    """Every workload's points measured over the nodes' samples (see the module notes)."""
    gpu, packages, interval = _merged(series)
    price = gpu_hour_price(spec)
    for workload in spec.serving.workloads:
        folder = run.path / "serving" / workload.name
        path = folder / "summary.json"
        if not path.is_file():
            continue
        summary = Summary.model_validate_json(path.read_text())
        for point in summary.points:
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
                items = [*_span(series, *span, 2 * interval), *windows]
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
