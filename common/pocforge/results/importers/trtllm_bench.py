"""TensorRT-LLM's ``trtllm-bench throughput`` report: its ``--report_json`` file or the text
it prints (one file per run = sweep point).

Both forms carry the same numbers: the printed report is written from the dictionary that
``--report_json`` saves (``ReportUtility.get_statistics_dict`` in
``tensorrt_llm/bench/dataclasses/reporting.py``, commit 0249976), so the text is first read
into that dictionary's keys — ``engine``, ``world_info``, ``request_info``, ``performance``
(``request_latency_percentiles_ms``), ``streaming_metrics`` (``ttft_percentiles``,
``tpot_percentiles``, ``gen_tps_percentiles``, only with ``--streaming``) — and one function
maps those to our metrics. The printed labels changed across versions (0.17: ``Token
Throughput`` for the output-token rate, ``Number of requests`` in the overview; later
``[w/ ctx] (tps/user)``, ``(tokens/sec/user)``, ``[1/TPOT]``); each label seen in real
output is mapped (``tests/data/importers/trtllm/``).

Definitions (``tensorrt_llm/bench/dataclasses/statistics.py``, ``RequestRecord``): times are
engine-side timestamps inside the benchmark process, which submits tokenized requests to the
LLM API directly (offline: no HTTP server, no SSE); TTFT = first token − submit; TPOT =
(final − first token) / (output tokens − 1) per request; request latency = final − submit;
percentiles are ``sorted(values)[int(n × p)]``, an order statistic without interpolation.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pocforge.results.importers.common import (
    Imported,
    ResultImportError,
    add_interactivity,
    add_point,
    sort_points,
)
from pocforge.results.stage_schema import DefinitionDifference, ServingPoint, ServingResult

TOOL = "trtllm-bench"
DEFINITIONS = {
    "time_to_first_token": "First-token timestamp − request submission, inside the benchmark "
    "process (LLM API, no HTTP); reported only with --streaming.",
    "time_per_output_token": "(final-token timestamp − first-token timestamp) / (output tokens − 1), "
    "per request; percentiles over requests; only with --streaming.",
    "request_latency": "Final response − request submission, per request, inside the process.",
    "system_output_throughput": "Output tokens of all requests (first token included) / (last "
    "request end − first request start). Printed as 'Token Throughput' by 0.17.",
    "system_total_throughput": "(Input + output tokens) / the same span.",
    "output_throughput_per_user": "Mean over requests of output tokens / request latency "
    "(prefill included: the '[w/ ctx]' figure).",
    "token_output_speed": "'Per User Output Speed': mean over requests of generated tokens "
    "after the first / generation time, i.e. a mean of 1 / TPOT.",
    "output_throughput_per_gpu": "system_output_throughput / world size (TP × PP).",
    "percentiles": "sorted(values)[int(n × p)]: an order statistic, no interpolation.",
    "issue_rate": "Requests / span of submission times; ~1e15 req/s means all at once.",
}
DIFFERENCES = [
    DefinitionDifference(
        metric="ttft_ms",
        theirs="engine timestamps inside the benchmark process: tokenized request handed to "
        "the LLM API to the first token, no HTTP, SSE or detokenization in the path",
        ours="client-side, request sent over HTTP to the first streamed chunk with text",
        effect="trtllm-bench's TTFT (and E2EL) is lower than a serving benchmark's on the "
        "same engine; compare it with trtllm-serve measured by our bench, not directly",
    ),
    DefinitionDifference(
        metric="e2el_ms",
        theirs="final response inside the process",
        ours="last byte of the HTTP response",
        effect="lower by the serving and network overhead",
    ),
    DefinitionDifference(
        metric="tpot_ms",
        theirs="same formula, (last − first token) / (output tokens − 1), on engine timestamps; "
        "only with --streaming",
        ours="on client chunk arrival times",
        effect="no network jitter; without --streaming there is no TPOT (nor TTFT) at all",
    ),
    DefinitionDifference(
        metric="*",
        theirs="percentiles are order statistics sorted[int(n·p)], no interpolation",
        ours="linear interpolation between order statistics (numpy's default, as vLLM)",
        effect="their p50/p90/p99 are the next sample up, at or above ours; with 100 "
        "requests or fewer their p99 is the maximum",
    ),
    DefinitionDifference(
        metric="interactivity",
        theirs="'Per User Output Speed' = mean over requests of 1 / TPOT",
        ours="1000 / median TPOT",
        effect="computed here from their TPOT median; their mean of reciprocals is kept "
        "in the notes",
    ),
    DefinitionDifference(
        metric="itl_ms",
        theirs="not reported (no per-token gaps)",
        ours="gap between token-carrying chunks",
        effect="no ITL for trtllm-bench results",
    ),
    DefinitionDifference(
        metric="*",
        theirs="offline load: every request queued at once (or --concurrency outstanding); "
        "the report keeps neither setting, only the measured mean concurrency",
        ours="a sweep point is a set concurrency or request rate",
        effect="imported points have mode 'unknown' and are named after their file",
    ),
]

_OVERVIEW = "PERFORMANCE OVERVIEW"
_SECTION = re.compile(r"^=\s+(.+?)\s*$")
_PERCENTILE = re.compile(r"^\[(TPOT|TTFT|GTPS|Latency)\]\s+(\w+)\s*:\s*(\S+)")
_KEY_VALUE = re.compile(r"^([A-Za-z][^:]*?)\s*:\s*(.*?)\s*$")
_PERCENTILE_BLOCK = {
    "Latency": ("performance", "request_latency_percentiles_ms"),
    "TTFT": ("streaming_metrics", "ttft_percentiles"),
    "TPOT": ("streaming_metrics", "tpot_percentiles"),
    "GTPS": ("streaming_metrics", "gen_tps_percentiles"),
}
# printed label -> (section of the report_json, key); every label seen in real reports.
_LABELS = {
    "Request Throughput (req/sec)": ("performance", "request_throughput_req_s"),
    "Total Output Throughput (tokens/sec)": ("performance", "system_output_throughput_tok_s"),
    "Token Throughput (tokens/sec)": ("performance", "system_output_throughput_tok_s"),
    "Total Token Throughput (tokens/sec)": ("performance", "system_total_throughput_tok_s"),
    "Total Latency (ms)": ("performance", "total_latency_ms"),
    "Average request latency (ms)": ("performance", "avg_request_latency_ms"),
    "Per User Output Throughput [w/ ctx] (tps/user)": (
        "performance",
        "output_throughput_per_user_tok_s",
    ),
    "Per User Output Throughput (tokens/sec/user)": (
        "performance",
        "output_throughput_per_user_tok_s",
    ),
    "Per GPU Output Throughput (tps/gpu)": ("performance", "output_throughput_per_gpu_tok_s"),
    "Per GPU Output Throughput (tokens/sec/gpu)": (
        "performance",
        "output_throughput_per_gpu_tok_s",
    ),
    "Average time-to-first-token [TTFT] (ms)": ("streaming_metrics", "avg_ttft_ms"),
    "Average time-per-output-token [TPOT] (ms)": ("streaming_metrics", "avg_tpot_ms"),
    "Per User Output Speed (tps/user)": ("streaming_metrics", "token_output_speed_tok_s"),
    "Per User Output Speed [1/TPOT] (tokens/sec/user)": (
        "streaming_metrics",
        "token_output_speed_tok_s",
    ),
    "Number of requests": ("request_info", "num_requests"),
    "Number of concurrent requests": ("request_info", "avg_num_concurrent_requests"),
    "Average Input Length (tokens)": ("request_info", "avg_input_length"),
    "Average Output Length (tokens)": ("request_info", "avg_output_length"),
    "TP Size": ("world_info", "tp_size"),
    "PP Size": ("world_info", "pp_size"),
    "EP Size": ("world_info", "ep_size"),
    "Max Runtime Batch Size": ("world_info", "max_batch_size"),
    "Max Runtime Tokens": ("world_info", "max_num_tokens"),
    "Scheduling Policy": ("world_info", "scheduling_policy"),
    "KV Memory Percentage": ("world_info", "kv_cache_percentage"),
    "Issue Rate (req/sec)": ("world_info", "issue_rate"),
    "Model": ("engine", "model"),
    "Model Path": ("engine", "model_path"),
    "Engine Directory": ("engine", "engine_dir"),
    "TensorRT-LLM Version": ("engine", "version"),
    "TensorRT LLM Version": ("engine", "version"),
    "Dtype": ("engine", "dtype"),
    "KV Cache Dtype": ("engine", "kv_cache_dtype"),
    "Quantization": ("engine", "quantization"),
}
_STATS = {
    "p50": "p50",
    "p90": "p90",
    "p95": "p95",
    "p99": "p99",
    "minimum": "min",
    "maximum": "max",
    "average": "mean",
}
REQUIRED = ("request_throughput_req_s", "system_output_throughput_tok_s", "total_latency_ms")


def _value(text: str) -> Any:
    """'90.00%' -> 0.9, '1.0526E+15' -> float, '100' -> int, 'None' -> None, else the text."""
    if text in ("None", "N/A", ""):
        return None
    try:
        if text.endswith("%"):
            return float(text[:-1]) / 100.0
        number = float(text)
    except ValueError:
        return text
    return int(number) if re.fullmatch(r"[-+]?\d+", text) else number


def parse_text(text: str, where: str) -> dict[str, Any]:
    """The printed report -> the ``--report_json`` dictionary (the keys it would hold)."""
    report: dict[str, Any] = {}
    section = None
    seen_overview = False
    for raw in text.splitlines():
        line = raw.strip()
        if m := _SECTION.match(line):
            section = m.group(1).upper()
            seen_overview = seen_overview or section.startswith(_OVERVIEW)
        elif m := _PERCENTILE.match(line):
            part, key = _PERCENTILE_BLOCK[m.group(1)]
            report.setdefault(part, {}).setdefault(key, {})[m.group(2).lower()] = _value(m.group(3))
        elif section != "DATASET DETAILS" and (m := _KEY_VALUE.match(line)):
            target = _LABELS.get(m.group(1))
            if target:
                report.setdefault(target[0], {})[target[1]] = _value(m.group(2))
    if not seen_overview:
        raise ResultImportError(
            f"{where}: not a trtllm-bench report (no '= {_OVERVIEW}' section, and not JSON)"
        )
    report.setdefault("performance", {})  # a cut overview is reported as truncated
    return report


def _stats(block: Any) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    if isinstance(block, dict):
        for key, value in block.items():
            if key in _STATS and isinstance(value, int | float):
                out[_STATS[key]] = float(value)
    if "p50" in out:
        out["median"] = out["p50"]
    return out


def _read(path: Path) -> dict[str, Any]:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ResultImportError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if not data.strip():
        raise ResultImportError(f"{path}: empty file, not a trtllm-bench report")
    try:
        if b"\x00" in data:
            raise UnicodeDecodeError("utf-8", data, 0, 1, "NUL byte")
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ResultImportError(
            f"{path}: binary data, not a trtllm-bench report (JSON or printed text)"
        ) from None
    if text.lstrip().startswith("{"):
        try:
            report = json.loads(text)
        except ValueError as exc:
            raise ResultImportError(f"{path}: not valid JSON ({exc})") from None
        if not isinstance(report, dict):
            raise ResultImportError(f"{path}: not a trtllm-bench report (expected a JSON object)")
        return report
    return parse_text(text, str(path))


def _point(report: dict[str, Any], path: Path, gpus: int | None) -> tuple[ServingPoint, list[str]]:
    perf = report.get("performance")
    if not isinstance(perf, dict):
        raise ResultImportError(f"{path}: not a trtllm-bench report (no 'performance' section)")
    missing = [k for k in REQUIRED if not isinstance(perf.get(k), int | float)]
    if missing:
        raise ResultImportError(
            f"{path}: trtllm-bench report without performance.{', performance.'.join(missing)}"
            " (truncated?)"
        )
    streaming = report.get("streaming_metrics") or {}
    requests_info = report.get("request_info") or {}
    duration = float(perf["total_latency_ms"]) / 1000.0
    requests = requests_info.get("num_requests")
    notes: list[str] = []
    if not isinstance(requests, int):
        # request_throughput is num_requests / total latency by definition
        requests = round(float(perf["request_throughput_req_s"]) * duration)
        notes.append(f"{path.name}: requests = request throughput × total latency ({requests})")
    metrics: dict[str, dict[str, float | None]] = {}
    for ours, block in (
        ("e2el_ms", perf.get("request_latency_percentiles_ms")),
        ("ttft_ms", streaming.get("ttft_percentiles")),
        ("tpot_ms", streaming.get("tpot_percentiles")),
    ):
        if stats := _stats(block):
            metrics[ours] = stats
    for ours, theirs in (("ttft_ms", "avg_ttft_ms"), ("tpot_ms", "avg_tpot_ms")):
        if isinstance(streaming.get(theirs), int | float):
            metrics.setdefault(ours, {}).setdefault("mean", float(streaming[theirs]))
    if isinstance(perf.get("avg_request_latency_ms"), int | float):
        metrics.setdefault("e2el_ms", {}).setdefault("mean", float(perf["avg_request_latency_ms"]))
    output = float(perf["system_output_throughput_tok_s"])
    metrics["request_throughput"] = {"value": float(perf["request_throughput_req_s"])}
    metrics["output_throughput"] = {"value": output}
    if isinstance(perf.get("system_total_throughput_tok_s"), int | float):
        metrics["total_token_throughput"] = {"value": float(perf["system_total_throughput_tok_s"])}
    per_gpu = perf.get("output_throughput_per_gpu_tok_s")
    world = _world_size(report)
    if gpus:
        metrics["output_throughput_per_gpu"] = {"value": output / gpus}
    elif isinstance(per_gpu, int | float) and per_gpu > 0:
        metrics["output_throughput_per_gpu"] = {"value": float(per_gpu)}
    elif world:
        metrics["output_throughput_per_gpu"] = {"value": output / world}
    add_interactivity(metrics)
    if isinstance(streaming.get("token_output_speed_tok_s"), int | float):
        notes.append(
            f"{path.name}: trtllm-bench per-user output speed (mean of 1/TPOT) "
            f"{streaming['token_output_speed_tok_s']:g} tok/s/user"
        )
    caveats = []
    concurrency = requests_info.get("avg_num_concurrent_requests")
    issue = (report.get("world_info") or {}).get("issue_rate")
    if isinstance(concurrency, int | float) or isinstance(issue, int | float):
        parts = [f"measured mean concurrency {concurrency:g}"] if concurrency else []
        parts += [f"issue rate {issue:.4g} req/s"] if isinstance(issue, int | float) else []
        caveats.append("offline trtllm-bench run: " + ", ".join(parts))
    if "ttft_ms" not in metrics:
        caveats.append("run without --streaming: no TTFT or TPOT")
    pid = re.sub(r"[^A-Za-z0-9_.-]+", "-", path.stem) or "point"
    return (
        ServingPoint(
            id=pid,
            mode="unknown",
            value=None,
            requests=requests,
            duration_s=duration,
            metrics=metrics,
            caveats=caveats,
        ),
        notes,
    )


def _world_size(report: dict[str, Any]) -> int | None:
    world = report.get("world_info") or {}
    if isinstance(world.get("world_size"), int):
        return world["world_size"]
    if isinstance(world.get("tp_size"), int) and isinstance(world.get("pp_size"), int):
        return world["tp_size"] * world["pp_size"]
    perf = report.get("performance") or {}
    total, per_gpu = (
        perf.get("system_output_throughput_tok_s"),
        perf.get("output_throughput_per_gpu_tok_s"),
    )
    if isinstance(total, int | float) and isinstance(per_gpu, int | float) and per_gpu > 0:
        return round(total / per_gpu)
    return None


def parse(paths: list[Path], workload: str, gpus: int | None = None) -> Imported:
    points: list[ServingPoint] = []
    notes: list[str] = []
    engine: dict[str, Any] = {}
    machine: dict[str, Any] = {}
    world = None
    for path in paths:
        path = Path(path)
        report = _read(path)
        point, point_notes = _point(report, path, gpus)
        add_point(points, point, path)
        notes.extend(point_notes)
        engine = engine or (report.get("engine") or {})
        machine = machine or (report.get("machine") or {})
        world = world or _world_size(report)
    result = ServingResult(
        workload=workload,
        tool=TOOL,
        tool_version=engine.get("version"),
        source_file=", ".join(Path(p).name for p in paths),
        model=engine.get("model"),
        gpus=gpus or world,
        gpu=machine.get("name"),
        points=sort_points(points),
        definitions=DEFINITIONS,
        differences=DIFFERENCES,
        notes=notes,
    )
    return Imported(tool=TOOL, serving=[result])
