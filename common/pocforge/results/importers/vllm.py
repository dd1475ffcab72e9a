"""vLLM's ``vllm bench serve --save-result [--save-detailed]`` JSON, one file per sweep point.

Keys read: ``max_concurrency``/``request_rate`` (the point), ``completed``, ``failed``,
``duration``, ``request_throughput``, ``output_throughput``, ``total_token_throughput``,
``request_goodput`` and ``<stat>_<ttft|tpot|itl|e2el>_ms``. With ``--save-detailed`` the
per-request arrays (``ttfts``, ``itls``, ``latencies`` in seconds, ``output_lens``,
``input_lens``, ``start_times``, ``queue_times``, ``errors``) become per-request records in
the serving benchmark's format, so verdicts get bootstrap intervals; where a file has no
``latencies`` (vLLM 0.1x), a request's E2EL is its TTFT plus its inter-chunk gaps.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pocforge.results.importers import serving_report
from pocforge.results.importers.common import (
    Imported,
    ResultImportError,
    add_interactivity,
    add_point,
    json_lines,
    keep_apart,
    parse_json,
    percentile_stats,
    point_id,
    read_text,
    renamed,
    require,
    sort_points,
)
from pocforge.results.stage_schema import DefinitionDifference, ServingPoint, ServingResult

TOOL = "vllm"
DEFINITIONS = {
    "ttft_ms": "Request sent to the first streamed event carrying any choice.",
    "tpot_ms": "(E2EL - TTFT) / (output_tokens - 1), requests with more than one output token.",
    "itl_ms": "Gap between consecutive streamed events (chunks), pooled over all requests.",
    "e2el_ms": "Request sent to the last streamed event carrying a choice.",
    "goodput": "Requests meeting every --goodput SLO (TTFT, TPOT, E2EL) / duration.",
}
DIFFERENCES = [
    DefinitionDifference(
        metric="ttft_ms",
        theirs="stops at the first SSE event with any choice (may carry no text)",
        ours="stops at the first event with non-empty text",
        effect="vLLM's TTFT can be slightly lower when a server sends an empty first chunk",
    ),
    DefinitionDifference(
        metric="e2el_ms",
        theirs="to the last event carrying a choice",
        ours="to the last byte of the stream",
        effect="vLLM's E2EL omits the final usage/[DONE] events: slightly lower",
    ),
    DefinitionDifference(
        metric="itl_ms",
        theirs="per streamed chunk, including chunks without text",
        ours="per token-carrying chunk",
        effect="near-zero gaps from empty chunks pull vLLM's ITL mean and low percentiles down",
    ),
]
REQUIRED = ("completed", "duration", "output_throughput", "total_token_throughput", "mean_ttft_ms")


def _point(data: dict[str, Any], path: Path, gpus: int | None) -> ServingPoint:
    require(data, REQUIRED, path, "vllm bench serve")
    concurrency = data.get("max_concurrency")
    rate = data.get("request_rate")
    rate = float(rate) if isinstance(rate, int | float) else None  # "inf" stays closed loop
    pid, mode, value = point_id(concurrency, rate)
    completed = int(data["completed"])
    # no "failed" key (benchmark_serving of May 2025 wrote none): failures unknown, not zero
    failed = int(data["failed"] or 0) if "failed" in data else None
    metrics: dict[str, dict[str, float | None]] = {
        m: percentile_stats(data, m.removesuffix("_ms"), m)
        for m in ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms")
    }
    metrics = {k: v for k, v in metrics.items() if v}
    scalars = {
        "request_throughput": data.get("request_throughput"),
        "output_throughput": data.get("output_throughput"),
        "total_token_throughput": data.get("total_token_throughput"),
        # benchmark_serving wrote this key with a stray colon for a while (the L40S file of May 2025)
        "goodput": data.get("request_goodput", data.get("request_goodput:")),
        "error_rate": failed / (completed + failed)
        if failed is not None and completed + failed
        else None,
    }
    if gpus and scalars["output_throughput"] is not None:
        scalars["output_throughput_per_gpu"] = scalars["output_throughput"] / gpus
    for name, value_ in scalars.items():
        if value_ is not None:
            metrics[name] = {"value": float(value_)}
    add_interactivity(metrics)
    return ServingPoint(
        id=pid,
        mode=mode,
        value=value,
        requests=completed,
        failed=failed,
        duration_s=float(data["duration"]),
        metrics=metrics,
        records_file=f"requests-{pid}.jsonl" if "ttfts" in data else None,
    )


def records(data: dict[str, Any], pid: str) -> list[Any]:
    """Per-request records from a ``--save-detailed`` result (times converted to ms)."""
    from pocforge.bench.records import RequestRecord

    # vLLM before ``latencies`` was saved (0.1x): a request's E2EL is its TTFT plus its
    # inter-chunk gaps, the same stream timestamps latency is taken from
    ttfts, lats = data.get("ttfts") or [], data.get("latencies") or []
    starts = data.get("start_times") or [0.0] * len(ttfts)
    t0 = min(starts) if starts else 0.0
    queue = data.get("queue_times") or [0.0] * len(ttfts)
    out = []
    for i, ttft in enumerate(ttfts):
        error = (data.get("errors") or [""] * len(ttfts))[i] or None
        out_len = (data.get("output_lens") or [None] * len(ttfts))[i]
        ok = error is None and ttft is not None and ttft > 0
        if ok and i < len(lats):
            e2el = lats[i] * 1000.0
        elif ok and "latencies" not in data:
            e2el = (ttft + sum(data["itls"][i])) * 1000.0
        else:
            e2el = None
        ttft_ms = ttft * 1000.0 if ok else None
        tpot = (
            (e2el - ttft_ms) / (out_len - 1)
            if ok and e2el is not None and out_len and out_len > 1
            else None
        )
        out.append(
            RequestRecord(
                point=pid,
                repeat=0,
                index=i,
                success=ok,
                error=error,
                scheduled_s=starts[i] - t0,
                sent_s=starts[i] - t0 + (queue[i] or 0.0),
                client_lag_ms=(queue[i] or 0.0) * 1000.0,
                ttft_ms=ttft_ms,
                e2el_ms=e2el,
                tpot_ms=tpot,
                itl_ms=[x * 1000.0 for x in (data["itls"][i] if ok else [])],
                prompt_tokens=(data.get("input_lens") or [None] * len(ttfts))[i],
                output_tokens=out_len if ok else None,
                token_chunks=len(data["itls"][i]) + 1 if ok else 0,
            )
        )
    return out


def parse(paths: list[Path], workload: str, gpus: int | None = None) -> Imported:
    points, recs = [], {}
    version = None
    model = None
    notes: list[str] = []
    for path in paths:
        text = read_text(path)
        if serving_report.holds_report(text):  # the printed report, as pasted
            found, said = serving_report.parse_text(path, text, TOOL, gpus)
            for point in found:
                add_point(points, point, path)
            notes += [f"{path.name}: {n}" for n in said]
            continue
        rows = _results(path, text)
        found = _labelled(rows, [_point(data, path, gpus) for data in rows])
        for data, point in zip(rows, keep_apart(found, notes), strict=True):
            add_point(points, point, path)
            model = model or data.get("model_id")
            version = version or data.get("vllm_version")
            if "ttfts" in data and "itls" in data:
                recs[point.id] = records(data, point.id)
    result = ServingResult(
        workload=workload,
        tool=TOOL,
        tool_version=version,
        source_file=", ".join(p.name for p in paths),
        model=model,
        gpus=gpus,
        points=sort_points(points),
        definitions=DEFINITIONS,
        differences=DIFFERENCES,
        notes=notes,
    )
    return Imported(tool=TOOL, serving=[result], records={workload: recs} if recs else {})


def _results(path: Path, text: str) -> list[dict[str, Any]]:
    """A result file's runs: one JSON object, or one per line (``--append-result`` appends
    each run to the same file)."""
    try:
        rows = json_lines(path, text)
    except ResultImportError:
        parse_json(path, text)  # the JSON error of the whole file, which says more
        raise
    if not rows or not all(isinstance(row, dict) for row in rows):
        raise ResultImportError(f"{path}: not a vllm bench serve result (expected a JSON object)")
    return rows


# keys of vLLM's result that differ between any two runs, never what tells a run apart
_PER_RUN = {"date", "tokenizer_id"}


def _labelled(rows: list[dict[str, Any]], points: list[ServingPoint]) -> list[ServingPoint]:
    """Runs of one file at the same load point told apart by the text fields that differ
    between them: ``--metadata deployment=base`` is a top-level ``"deployment": "base"``
    (``r10-base``, ``r10-kvcache``); what stays alike is a rerun, kept apart by order."""
    out = []
    for data, point in zip(rows, points, strict=True):
        peers = [r for r, p in zip(rows, points, strict=True) if p.id == point.id]
        keys = sorted(
            k
            for k in set().union(*peers)
            if k not in _PER_RUN
            and all(isinstance(r.get(k), str) for r in peers)
            and len({r.get(k) for r in peers}) > 1
        )
        if keys:  # a metadata value may hold a "/" (a model path): not in a file name
            label = "-".join([point.id, *(data[k] for k in keys)])
            point = renamed(point, re.sub(r"[^A-Za-z0-9._-]+", "_", label))
        out.append(point)
    return out
