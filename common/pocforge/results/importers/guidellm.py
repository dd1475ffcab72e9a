"""GuideLLM's ``benchmarks.json`` (``guidellm run --output kind=json``), one benchmark per point.

GuideLLM's names hide two traps. Its ``time_per_output_token_ms`` is request latency /
output tokens, so it *includes* the first token (and so the prefill); its
``inter_token_latency_ms`` is ``(latency - TTFT) / (output_tokens - 1)`` — our TPOT. Both are
token-weighted distributions (each request counted once per output token), so their
percentiles lean towards long answers. ``request_latency`` is in seconds. Its
``*_per_second`` means are means of instantaneous rates; totals / duration (our
definition) are computed from its token counts instead.

A file that is not JSON is read as GuideLLM's printed report
(:mod:`pocforge.results.importers.guidellm_report`), with the same definitions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pocforge.results.importers import guidellm_report
from pocforge.results.importers.common import (
    Imported,
    ResultImportError,
    add_interactivity,
    keep_apart,
    parse_json,
    read_text,
    sort_points,
)
from pocforge.results.stage_schema import DefinitionDifference, ServingPoint, ServingResult

TOOL = "guidellm"
DEFINITIONS = {
    "time_to_first_token_ms": "Request start to the first token.",
    "inter_token_latency_ms": "(request latency - TTFT) / (output tokens - 1), token-weighted.",
    "time_per_output_token_ms": "Request latency / output tokens (first token included), token-weighted.",
    "request_latency": "Request start to the end of the response, in seconds.",
    "output_tokens_per_second": "Mean of the instantaneous output token rate over the benchmark.",
}
DIFFERENCES = [
    DefinitionDifference(
        metric="tpot_ms",
        theirs="time_per_output_token includes the first token: latency / output_tokens",
        ours="excludes it: (E2EL - TTFT) / (output_tokens - 1)",
        effect="GuideLLM's TPOT is higher by roughly TTFT / output_tokens; its "
        "inter_token_latency is what we call TPOT and is imported as tpot_ms",
    ),
    DefinitionDifference(
        metric="tpot_ms",
        theirs="percentiles over tokens (each request weighted by its output tokens)",
        ours="percentiles over requests",
        effect="equal for fixed output lengths; otherwise long answers weigh more in GuideLLM",
    ),
    DefinitionDifference(
        metric="output_throughput",
        theirs="output_tokens_per_second is a mean of instantaneous rates",
        ours="output tokens / benchmark duration",
        effect="imported as tokens / duration computed from GuideLLM's totals",
    ),
    DefinitionDifference(
        metric="itl_ms",
        theirs="not reported per chunk",
        ours="gap between token-carrying chunks",
        effect="no ITL for GuideLLM results",
    ),
]


def _dist(entry: Any, scale: float = 1.0) -> dict[str, float | None]:
    s = (entry or {}).get("successful") if isinstance(entry, dict) else None
    if not isinstance(s, dict) or not s.get("count"):
        return {}
    out: dict[str, float | None] = {
        "mean": s["mean"] * scale,
        "median": s["median"] * scale,
        "std": s["std_dev"] * scale,
        "min": s["min"] * scale,
        "max": s["max"] * scale,
    }
    for key, value in (s.get("percentiles") or {}).items():
        name = {"p50": "p50", "p90": "p90", "p95": "p95", "p99": "p99", "p999": "p99.9"}.get(key)
        if name:
            out[name] = value * scale
    return out


def _total(entry: Any) -> float | None:
    s = (entry or {}).get("successful") if isinstance(entry, dict) else None
    return float(s["total_sum"]) if isinstance(s, dict) and "total_sum" in s else None


def _point(bench: dict[str, Any], path: Path, gpus: int | None) -> ServingPoint:
    try:
        strategy = bench["config"]["strategy"]
        m = bench["metrics"]
        duration = float(bench["duration"])
    except (KeyError, TypeError):
        raise ResultImportError(
            f"{path}: a benchmark without config.strategy, metrics or duration"
        ) from None
    kind = str(strategy.get("type_"))
    pid, mode, value = guidellm_report.load_point(
        kind, str(strategy.get("streams") or strategy.get("rate") or "")
    )
    totals = m.get("request_totals") or {}
    ok, errored = int(totals.get("successful", 0)), int(totals.get("errored", 0))
    metrics: dict[str, dict[str, float | None]] = {
        "ttft_ms": _dist(m.get("time_to_first_token_ms")),
        "tpot_ms": _dist(m.get("inter_token_latency_ms")),
        "tpot_incl_first_ms": _dist(m.get("time_per_output_token_ms")),
        "e2el_ms": _dist(m.get("request_latency"), 1000.0),
    }
    metrics = {k: v for k, v in metrics.items() if v}
    metrics.update(
        guidellm_report.totals_rates(
            ok,
            errored,
            duration,
            _total(m.get("output_token_count")),
            _total(m.get("total_token_count")),
            gpus,
        )
    )
    add_interactivity(metrics)
    caveats = []
    for warning in bench.get("warnings") or []:
        text = warning.get("message") if isinstance(warning, dict) else str(warning)
        if text:
            caveats.append(f"GuideLLM: {text}")
    return ServingPoint(
        id=pid,
        mode=mode,
        value=value,
        requests=ok,
        failed=errored,
        duration_s=duration,
        metrics=metrics,
        caveats=caveats,
    )


def parse(paths: list[Path], workload: str, gpus: int | None = None) -> Imported:
    """``benchmarks.json`` files or printed reports (told apart by their text); runs at one
    load point stay apart (``c1``, ``c1-2``), never one kept over the other."""
    points: list[ServingPoint] = []
    notes: list[str] = []
    version = model = None
    for path in paths:
        text = read_text(path)
        if not text.lstrip().startswith("{"):  # the printed report, as pasted
            found, said, printed_version, printed_model = guidellm_report.parse_text(
                path, text, gpus
            )
            points += found
            notes += [f"{path.name}: {note}" for note in said]
            version, model = version or printed_version, model or printed_model
            continue
        data = parse_json(path, text)
        if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
            raise ResultImportError(
                f"{path}: not a GuideLLM benchmarks.json (no 'benchmarks' list)"
            )
        version = version or (data.get("metadata") or {}).get("guidellm_version")
        points += [_point(bench, path, gpus) for bench in data["benchmarks"]]
    if not points:
        raise ResultImportError(f"{paths[0]}: the GuideLLM file holds no benchmarks")
    result = ServingResult(
        workload=workload,
        tool=TOOL,
        tool_version=version,
        source_file=", ".join(p.name for p in paths),
        model=model,
        gpus=gpus,
        points=sort_points(keep_apart(points, notes)),
        definitions=DEFINITIONS,
        differences=DIFFERENCES,
        notes=notes,
    )
    return Imported(tool=TOOL, serving=[result])
