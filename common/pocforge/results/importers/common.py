"""What every importer returns, and helpers shared by the serving importers (the training
importers share :mod:`pocforge.results.importers.training`)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pocforge.results.stage_schema import (
    CollectiveResult,
    KernelResults,
    ServingPoint,
    ServingResult,
    TrainingResult,
)


class ResultImportError(ValueError):
    """A file the importer cannot read as its format; one clear line."""


@dataclass
class Imported:
    """Normalised results of one or more input files of one tool."""

    tool: str
    serving: list[ServingResult] = field(default_factory=list)
    # workload -> point id -> per-request records (bench RequestRecord), where the tool kept them
    records: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    collectives: list[CollectiveResult] = field(default_factory=list)
    # a training log's result: one per run (``training/result.json``)
    training: TrainingResult | None = None
    # a kernel benchmark's results (``kernels/results.json``), and the files kept beside
    # them in the stage: their path there -> the file read (a GPU profiler's summaries)
    kernels: KernelResults | None = None
    kernel_files: dict[str, Path] = field(default_factory=dict)


def read_text(path: Path) -> str:
    """A result file's text, read once: an importer that takes two forms (a printed report
    or a JSON file) tells them apart on this text, never by reading the file again."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ResultImportError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ResultImportError(
            f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from None


def parse_json(path: Path, text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ResultImportError(f"{path}: not valid JSON ({exc})") from None


def read_json(path: Path) -> Any:
    return parse_json(path, read_text(path))


def json_lines(path: Path, text: str) -> list[dict[str, Any]]:
    """``path``'s ``text`` as a JSON object per line (SGLang appends one per run), or one
    JSON object."""
    try:
        data = json.loads(text)
        return data if isinstance(data, list) else [data]
    except ValueError:
        pass
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except ValueError:
                raise ResultImportError(f"{path}:{number}: not a JSON object per line") from None
    return rows


def add_point(points: list[ServingPoint], point: ServingPoint, path: Path) -> None:
    """``point`` added to ``points``; a second result for one point is refused, never one
    silently kept over the other."""
    if any(p.id == point.id for p in points):
        raise ResultImportError(f"{path}: a second result for point {point.id}")
    points.append(point)


def require(data: dict[str, Any], keys: tuple[str, ...], path: Path, tool: str) -> None:
    missing = [k for k in keys if k not in data]
    if missing:
        raise ResultImportError(f"{path}: not a {tool} result (missing {', '.join(missing)})")


STAT_KEYS = {"mean": "mean", "median": "median", "std": "std"}
_PCT = re.compile(r"^p(\d+(?:\.\d+)?)$")


def percentile_stats(data: dict[str, Any], tool_metric: str, ours: str) -> dict[str, float | None]:
    """``mean_ttft_ms``, ``p99_ttft_ms``… (vLLM / SGLang key style) -> {mean, p99, …}."""
    out: dict[str, float | None] = {}
    suffix = f"_{tool_metric}_ms"
    for key, value in data.items():
        if not key.endswith(suffix) or not isinstance(value, int | float):
            continue
        stat = key[: -len(suffix)]
        if stat in STAT_KEYS:
            out[STAT_KEYS[stat]] = float(value)
        elif _PCT.match(stat):
            out[stat.replace("p999", "p99.9")] = float(value)
    if "median" not in out and "p50" in out:
        out["median"] = out["p50"]
    return out


def point_id(concurrency: Any, rate: Any) -> tuple[str, str, float | None]:
    """(id, mode, value) from a tool's max-concurrency and request-rate settings."""
    if isinstance(concurrency, int | float) and concurrency > 0:
        return f"c{int(concurrency)}", "concurrency", float(concurrency)
    if isinstance(rate, int | float) and rate > 0:
        return f"r{rate:g}", "rate", float(rate)
    return "point", "unknown", None


def add_interactivity(metrics: dict[str, dict[str, float | None]]) -> None:
    """Tokens per second one user sees (1000 / median TPOT), where the TPOT is known."""
    median = metrics.get("tpot_ms", {}).get("median")
    if median:
        metrics["interactivity"] = {"median": 1000.0 / median}


def honest_point(point: ServingPoint) -> ServingPoint:
    """A point where no request completed is ``failed``: the latencies and rates a tool
    prints over no requests (vLLM: 0.0 ms, the best point on any chart) are not a run's,
    so only its error rate is kept."""
    if point.requests != 0:
        return point
    kept = {k: v for k, v in point.metrics.items() if k == "error_rate"}
    caveat = (
        f"no request completed ({point.failed or 0} failed): the tool's latencies and rates "
        "over no requests are left out"
    )
    return point.model_copy(
        update={"status": "failed", "metrics": kept, "caveats": [*point.caveats, caveat]}
    )


def renamed(point: ServingPoint, new: str) -> ServingPoint:
    """``point`` under id ``new``, its per-request file (named by the id) with it."""
    records = f"requests-{new}.jsonl" if point.records_file else None
    return point.model_copy(update={"id": new, "records_file": records})


def keep_apart(points: list[ServingPoint], notes: list[str]) -> list[ServingPoint]:
    """Points that still share an id (a rerun appended to the same file, a before/after
    pasted together) stay apart, in their order: ``c8``, ``c8-2``; each said in ``notes``.
    Never merged, never one dropped for another."""
    seen: dict[str, int] = {}
    out = []
    for point in points:
        seen[point.id] = seen.get(point.id, 0) + 1
        if seen[point.id] > 1:
            new = f"{point.id}-{seen[point.id]}"
            notes.append(
                f"point {point.id}: run {seen[point.id]} at the same load point kept as {new}"
            )
            point = renamed(point, new)
        out.append(point)
    return out


def sort_points(points: list[ServingPoint]) -> list[ServingPoint]:
    return sorted(points, key=lambda p: (p.mode, p.value if p.value is not None else 0.0, p.id))
