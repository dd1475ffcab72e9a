"""SGLang's ``python -m sglang.benchmark.serving --output-file X.jsonl`` (one JSON line per run).

The keys follow vLLM's, except ``<stat>_e2e_latency_ms`` for end-to-end latency and
``total_throughput`` for input + output tokens per second. ``--output-details`` adds
per-request ``ttfts`` and ``itls`` but no latencies or send times, so no per-request
records are kept: verdicts on SGLang results use the point values.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pocforge.results.importers.common import (
    Imported,
    ResultImportError,
    percentile_stats,
    point_id,
    read_json_lines,
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
REQUIRED = ("completed", "duration", "output_throughput", "total_throughput", "mean_ttft_ms")


def _point(data: dict[str, Any], path: Path, gpus: int | None) -> ServingPoint:
    require(data, REQUIRED, path, "sglang bench_serving")
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
    if metrics.get("tpot_ms", {}).get("median"):
        metrics["interactivity"] = {"median": 1000.0 / metrics["tpot_ms"]["median"]}
    return ServingPoint(
        id=pid,
        mode=mode,
        value=value,
        requests=completed,
        failed=failed,
        duration_s=float(data["duration"]),
        metrics=metrics,
    )


def parse(paths: list[Path], workload: str, gpus: int | None = None) -> Imported:
    points: list[ServingPoint] = []
    model = None
    for path in paths:
        rows = read_json_lines(path)
        if not rows or not all(isinstance(r, dict) for r in rows):
            raise ResultImportError(f"{path}: not an sglang bench_serving result (no JSON objects)")
        for row in rows:
            point = _point(row, path, gpus)
            points = [p for p in points if p.id != point.id] + [point]  # a rerun replaces
            model = model or (row.get("server_info") or {}).get("model_path")
    result = ServingResult(
        workload=workload,
        tool=TOOL,
        source_file=", ".join(p.name for p in paths),
        model=model,
        gpus=gpus,
        points=sort_points(points),
        definitions=DEFINITIONS,
        differences=DIFFERENCES,
    )
    return Imported(tool=TOOL, serving=[result])
