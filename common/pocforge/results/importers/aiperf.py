"""NVIDIA AIPerf's ``profile_export_aiperf.json`` (one file per profile run = sweep point).

Each metric is ``{"unit": …, "avg": …, "p50": …, "p99": …, "std": …}``: at the top level
since AIPerf 0.2, under ``records`` by tag in 0.1 (``ttft`` for ``time_to_first_token``,
no ``inter_chunk_latency``, no ``benchmark_duration`` and no version: imported alike, what it
lacks said). AIPerf names
things differently from vLLM: its ``inter_token_latency`` is per request
``(latency - TTFT) / (output_tokens - 1)`` — our TPOT — and its per-chunk gap is
``inter_chunk_latency`` — our ITL. Output tokens are counted with the client's tokenizer
unless ``--use-server-token-count`` was given.

Failed requests are ``error_request_count`` (``error_summary`` lists each error *kind* with
its count, said in a caveat). A run where no request completed writes no metric at all,
only its version and errors (AIPerf 0.8 on B200 when the server died mid-run): imported as
a failed point, never refused as "not AIPerf".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pocforge.results.importers.common import (
    Imported,
    ResultImportError,
    add_interactivity,
    add_point,
    point_id,
    read_json,
    sort_points,
)
from pocforge.results.stage_schema import DefinitionDifference, ServingPoint, ServingResult

TOOL = "aiperf"
# ours -> (theirs, factor to ms)
DISTRIBUTIONS = {
    "ttft_ms": "time_to_first_token",
    "tpot_ms": "inter_token_latency",
    "itl_ms": "inter_chunk_latency",
    "e2el_ms": "request_latency",
}
SCALARS = {
    "request_throughput": "request_throughput",
    "output_throughput": "output_token_throughput",
    "total_token_throughput": "total_token_throughput",
    "goodput": "good_request_throughput",
}
DEFINITIONS = {
    "time_to_first_token": "Request sent to the first response chunk with content.",
    "inter_token_latency": "(request_latency - TTFT) / (output_sequence_length - 1), per request.",
    "inter_chunk_latency": "Gap between consecutive response chunks.",
    "request_latency": "Request sent to the last response chunk.",
    "output_token_throughput": "Output tokens of all requests / benchmark duration.",
    "output_sequence_length": "Output tokens per request, counted with the client tokenizer.",
}
DIFFERENCES = [
    DefinitionDifference(
        metric="tpot_ms",
        theirs="called inter_token_latency (ITL)",
        ours="called tpot_ms; our itl_ms is their inter_chunk_latency",
        effect="same formula; compare AIPerf's ITL with our TPOT, not our ITL",
    ),
    DefinitionDifference(
        metric="tpot_ms",
        theirs="output tokens counted by re-tokenizing the text on the client",
        ours="output tokens from the server's usage",
        effect="re-tokenized counts can differ (here by the usage discrepancy AIPerf reports), "
        "shifting TPOT and token throughput",
    ),
]
_STATS = {"avg": "mean", "std": "std", "min": "min", "max": "max"}


def _stats(entry: Any) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    if not isinstance(entry, dict):
        return out
    for key, value in entry.items():
        if not isinstance(value, int | float):
            continue
        if key in _STATS:
            out[_STATS[key]] = float(value)
        elif key in ("p50", "p90", "p95", "p99"):
            out[key] = float(value)
    if "p50" in out:
        out["median"] = out["p50"]
    return out


def _concurrency(data: dict[str, Any]) -> tuple[Any, Any]:
    """(concurrency, request rate) of the profiling run: ``input_config.loadgen`` (AIPerf
    before 0.10), else its profiling phase (0.10 on: ``phases`` a list of
    ``{"name": "profiling", "type": "poisson", "rate": 8.0}`` or ``{…, "concurrency": 1}``;
    warm-up phases left out), else the command line it records."""
    cfg = data.get("input_config") or {}
    load = cfg.get("loadgen") or cfg.get("load") or {}
    conc, rate = load.get("concurrency"), load.get("request_rate")
    phases = cfg.get("phases") or {}
    for phase in phases.values() if isinstance(phases, dict) else phases:
        if not isinstance(phase, dict) or phase.get("kind", phase.get("name")) == "warmup":
            continue
        conc = conc or phase.get("concurrency")
        rate = rate or phase.get("request_rate") or phase.get("rate")
    cmd = (data.get("run_info") or {}).get("cli_command") or ""
    parts = cmd.replace("'", "").split()
    if conc is None:
        conc = _flag(parts, "--concurrency")
    if rate is None:
        rate = _flag(parts, "--request-rate")
    return conc, rate


def _flag(parts: list[str], flag: str) -> float | None:
    """A number the recorded command line gave ``flag`` (None: it gave none)."""
    return float(parts[parts.index(flag) + 1]) if flag in parts else None


EARLY_TAGS = {"ttft": "time_to_first_token"}  # AIPerf 0.1's tags that were renamed
EARLY = (
    "AIPerf 0.1 layout (metrics under 'records'): no inter_chunk_latency (no ITL), no "
    "benchmark duration and no AIPerf version in the file"
)


def _flat(data: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The file's metrics at the top level, as AIPerf 0.2 on writes them; the caveats of
    the layout it came in."""
    records = data.get("records")
    if "time_to_first_token" in data or not isinstance(records, dict):
        return data, []
    flat = {k: v for k, v in data.items() if k != "records"}
    flat.update({EARLY_TAGS.get(tag, tag): entry for tag, entry in records.items()})
    return flat, [EARLY]


def _failures(data: dict[str, Any]) -> tuple[int, list[str]]:
    """How many requests failed (``error_request_count``, else the ``count`` of each
    ``error_summary`` entry: the summary lists error *kinds*) and each kind in words."""
    kinds = [e for e in data.get("error_summary") or [] if isinstance(e, dict)]
    counted = (data.get("error_request_count") or {}).get("avg")
    failed = (
        int(counted)
        if isinstance(counted, int | float)
        else sum(int(e.get("count") or 1) for e in kinds)
    )
    words = []
    for entry in kinds:
        details = entry.get("error_details") or {}
        what = " ".join(str(details[k]) for k in ("code", "type") if details.get(k) is not None)
        words.append(f"{entry.get('count', '?')} × {what or 'unknown error'}")
    return failed, words


def _is_aiperf(data: dict[str, Any]) -> bool:
    """An AIPerf summary: its metrics, or (a run where no request completed, which has
    none) its version and the errors it counted."""
    if "time_to_first_token" in data and "request_throughput" in data:
        return True
    return "aiperf_version" in data and _failures(data)[0] > 0


def _point(data: dict[str, Any], path: Path, gpus: int | None) -> ServingPoint:
    data, caveats = _flat(data)
    if not _is_aiperf(data):
        raise ResultImportError(f"{path}: not an AIPerf profile_export_aiperf.json")
    conc, rate = _concurrency(data)
    pid, mode, value = point_id(conc, rate)
    metrics: dict[str, dict[str, float | None]] = {}
    for ours, theirs in DISTRIBUTIONS.items():
        stats = _stats(data.get(theirs))
        if stats:
            metrics[ours] = stats
    for ours, theirs in SCALARS.items():
        avg = (data.get(theirs) or {}).get("avg")
        if isinstance(avg, int | float):
            metrics[ours] = {"value": float(avg)}
    completed = int((data.get("request_count") or {}).get("avg") or 0)
    errors, kinds = _failures(data)
    err = (data.get("request_error_rate") or {}).get("avg")
    if isinstance(err, int | float):
        metrics["error_rate"] = {"value": float(err) / 100.0}  # AIPerf reports percent
    elif completed + errors:
        metrics["error_rate"] = {"value": errors / (completed + errors)}
    if kinds:
        caveats.append(f"{errors} request(s) failed: {'; '.join(kinds)}")
    if gpus and "output_throughput" in metrics:
        metrics["output_throughput_per_gpu"] = {
            "value": metrics["output_throughput"]["value"] / gpus
        }
    add_interactivity(metrics)
    duration = (data.get("benchmark_duration") or {}).get("avg")
    if data.get("was_cancelled"):
        caveats.append("AIPerf reports the profile run was cancelled")
    return ServingPoint(
        id=pid,
        mode=mode,
        value=value,
        requests=completed,
        failed=errors or None,
        duration_s=float(duration) if duration else None,
        metrics=metrics,
        caveats=caveats,
    )


def parse(paths: list[Path], workload: str, gpus: int | None = None) -> Imported:
    points: list[ServingPoint] = []
    version = model = None
    for path in paths:
        data = read_json(path)
        if not isinstance(data, dict):
            raise ResultImportError(f"{path}: not an AIPerf profile_export_aiperf.json")
        point = _point(data, path, gpus)
        add_point(points, point, path)
        version = version or data.get("aiperf_version")
        names = ((data.get("input_config") or {}).get("endpoint") or {}).get("model_names")
        model = model or (names[0] if isinstance(names, list) and names else None)
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
    )
    return Imported(tool=TOOL, serving=[result])
