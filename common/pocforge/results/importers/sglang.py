"""SGLang's ``python -m sglang.benchmark.serving --output-file X.jsonl`` (one JSON line per run).

The keys follow vLLM's, except ``<stat>_e2e_latency_ms`` for end-to-end latency and
``total_throughput`` for input + output tokens per second. ``--output-details`` adds
per-request ``ttfts`` and ``itls`` but no latencies or send times, so no per-request
records are kept: verdicts on SGLang results use the point values.

Two layouts, told apart by ``total_throughput``:

- **since 2025** (SGLang 0.4.x late releases on): every statistic, ``request_throughput``
  and ``total_throughput``;
- **late 2024** (``sglang.bench_serving`` of SGLang 0.4.0): the median TTFT and ITL, the
  mean and median E2E latency, ``output_throughput`` and the token totals only. Request and
  total token throughput follow from ``completed``, the totals and ``duration`` as the
  tool itself computes them, and are derived; the rest is absent, and said.

A file appended run after run holds one point per line; runs at the same load point on
different datasets are told apart by the dataset (``c1-sharegpt``), and runs of one dataset
in several shapes by the shape (``point-random-4096x1024-ratio0``: an offline sweep of
lengths at ``inf``), never merged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pocforge.results.importers import serving_report
from pocforge.results.importers.common import (
    Imported,
    ResultImportError,
    add_interactivity,
    json_lines,
    keep_apart,
    percentile_stats,
    point_id,
    read_text,
    require,
    sort_points,
)
from pocforge.results.stage_schema import DefinitionDifference, ServingPoint, ServingResult

TOOL = "sglang"
DEFINITIONS = {
    "ttft_ms": "Request sent to the first streamed chunk with content.",
    "tpot_ms": "(latency - TTFT) / (output_tokens - 1), per request.",
    "itl_ms": "Gap between consecutive streamed chunks, pooled over all requests.",
    "e2el_ms": "Request sent to the end of the response (`e2e_latency`).",
    "output_throughput": "Output tokens (server usage, else tokenizer) / duration.",
}
DIFFERENCES = [
    DefinitionDifference(
        metric="itl_ms",
        theirs="per streamed chunk",
        ours="per token-carrying chunk",
        effect="equal when every chunk carries text; lower when a server sends empty chunks",
    ),
    DefinitionDifference(
        metric="e2el_ms",
        theirs="until the response iterator ends (after [DONE])",
        ours="to the last byte of the stream",
        effect="essentially the same instant",
    ),
]
REQUIRED = ("completed", "duration", "output_throughput", "median_ttft_ms", "median_e2e_latency_ms")
LATE_2024 = (
    "SGLang bench_serving of late 2024 (no total_throughput): only the median TTFT and ITL and "
    "the mean and median E2E latency are in the file; request and total token throughput are "
    "derived from its completed requests, token totals and duration as the tool computes them"
)


def _derived(data: dict[str, Any]) -> dict[str, Any]:
    """The late-2024 layout's throughputs, from its own totals (``bench_serving.py`` of
    SGLang 0.4.0: ``completed / dur_s`` and ``(total_input + sum(output_lens)) / dur_s``)."""
    if "total_throughput" in data or not data["duration"]:
        return data
    duration = float(data["duration"])
    out = dict(data)
    out["request_throughput"] = data["completed"] / duration
    if "total_input_tokens" in data and "total_output_tokens" in data:
        out["total_throughput"] = (
            data["total_input_tokens"] + data["total_output_tokens"]
        ) / duration
    return out


def _point(data: dict[str, Any], path: Path, gpus: int | None) -> ServingPoint:
    require(data, REQUIRED, path, "sglang bench_serving")
    data = _derived(data)
    rate = data.get("request_rate")
    rate = float(rate) if isinstance(rate, int | float) and rate != float("inf") else None
    pid, mode, value = point_id(data.get("max_concurrency"), rate)
    completed = int(data["completed"])
    errors = [e for e in data.get("errors") or [] if e]
    failed = len(errors) if "errors" in data else None
    metrics: dict[str, dict[str, float | None]] = {
        "ttft_ms": percentile_stats(data, "ttft", "ttft_ms"),
        "tpot_ms": percentile_stats(data, "tpot", "tpot_ms"),
        "itl_ms": percentile_stats(data, "itl", "itl_ms"),
        "e2el_ms": percentile_stats(data, "e2e_latency", "e2el_ms"),
    }
    metrics = {k: v for k, v in metrics.items() if v}
    scalars = {
        "request_throughput": data.get("request_throughput"),
        "output_throughput": data.get("output_throughput"),
        "total_token_throughput": data.get("total_throughput"),
    }
    if failed is not None and completed + failed:
        scalars["error_rate"] = failed / (completed + failed)
    if gpus and scalars["output_throughput"] is not None:
        scalars["output_throughput_per_gpu"] = scalars["output_throughput"] / gpus
    for name, v in scalars.items():
        if v is not None:
            metrics[name] = {"value": float(v)}
    add_interactivity(metrics)
    return ServingPoint(
        id=pid,
        mode=mode,
        value=value,
        requests=completed,
        failed=failed,
        duration_s=float(data["duration"]),
        metrics=metrics,
    )


def _workload(row: dict[str, Any]) -> tuple[str, str]:
    """(dataset, its shape): the random datasets' input and output lengths (and range
    ratio), the ShareGPT output length where one was set; two runs at one load point with
    different shapes measured different workloads."""
    name = str(row.get("dataset_name") or "unknown")
    if name.startswith("random") and row.get("random_input_len") is not None:
        shape = f"{row['random_input_len']}x{row.get('random_output_len')}"
        ratio = row.get("random_range_ratio")
        return name, shape if ratio in (None, 1.0) else f"{shape}-ratio{ratio:g}"
    out = row.get("sharegpt_output_len")
    return name, f"out{out}" if out else ""


def _apart(rows: list[tuple[dict[str, Any], ServingPoint]]) -> tuple[list[ServingPoint], list[str]]:
    """The points of every run: those at one load point told apart by their dataset, and
    by its shape where one dataset ran at several (a sweep of input/output lengths at
    ``inf``, as SGLang's offline benchmarks append them); a rerun of the same point and
    workload is kept beside the first (``…-2``), said."""
    workloads: dict[str, set[tuple[str, str]]] = {}
    for row, point in rows:
        workloads.setdefault(point.id, set()).add(_workload(row))
    labelled = []
    for row, point in rows:
        seen = workloads[point.id]
        dataset, shape = _workload(row)
        parts = [point.id]
        if len({d for d, _ in seen}) > 1:
            parts.append(dataset)
        if len({s for d, s in seen if d == dataset}) > 1:
            parts.append(shape)
        labelled.append(point.model_copy(update={"id": "-".join(parts)}))
    notes: list[str] = []
    return keep_apart(labelled, notes), notes


def parse(paths: list[Path], workload: str, gpus: int | None = None) -> Imported:
    runs: list[tuple[dict[str, Any], ServingPoint]] = []
    printed: list[ServingPoint] = []
    said: list[str] = []
    model = None
    for path in paths:
        text = read_text(path)
        if serving_report.holds_report(text):  # the printed report, as pasted
            found, notes = serving_report.parse_text(path, text, TOOL, gpus)
            printed += found
            said += [f"{path.name}: {n}" for n in notes]
            continue
        rows = json_lines(path, text)
        if not rows or not all(isinstance(r, dict) for r in rows):
            raise ResultImportError(f"{path}: not an sglang bench_serving result (no JSON objects)")
        for row in rows:
            runs.append((row, _point(row, path, gpus)))
            model = model or (row.get("server_info") or {}).get("model_path")
    points, notes = _apart(runs)
    if any("total_throughput" not in row for row, _ in runs):
        notes.insert(0, LATE_2024)
    for point in printed:
        if any(p.id == point.id for p in points):
            raise ResultImportError(
                f"a printed report and a result file both hold point {point.id}"
            )
        points.append(point)
    notes += said
    result = ServingResult(
        workload=workload,
        tool=TOOL,
        source_file=", ".join(p.name for p in paths),
        model=model,
        gpus=gpus,
        points=sort_points(points),
        definitions=DEFINITIONS,
        differences=DIFFERENCES,
        notes=notes,
    )
    return Imported(tool=TOOL, serving=[result])
