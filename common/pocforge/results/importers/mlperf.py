"""MLPerf Inference LoadGen summaries (``mlperf_log_summary.txt``) of the LLM benchmarks.

A submission's ``results/<system>/<benchmark>/<Scenario>/performance/run_1/`` holds the
file LoadGen printed; the LLM scenarios (Server, Offline, Interactive) report tokens per
second and, for Server and Interactive, first-token and time-per-output-token latencies in
nanoseconds. Each file is one point, named after its scenario (``server``, ``offline``).
The summary names neither the system nor its GPU count: the competitor entry supplies them
(``gpus``), and its ``published`` block the submission's address and round.
"""

from __future__ import annotations

import re
from pathlib import Path

from pocforge.results.importers.common import Imported, ResultImportError, sort_points
from pocforge.results.stage_schema import DefinitionDifference, ServingPoint, ServingResult

TOOL = "mlperf"
_LINE = re.compile(r"^\s*(?P<key>[^:]+?)\s*:\s*(?P<value>\S.*?)\s*$")
# "50.00 percentile first token latency (ns)", "Mean Time to Output Token (ns)"
_STAT = re.compile(
    r"^(?:(?P<pct>\d+(?:\.\d+)?) percentile|(?P<word>min|max|mean))"
    r" (?P<what>latency|first token latency|time to output token) \(ns\)$",
    re.IGNORECASE,
)
# the summary's last lines: "9 warnings encountered. See detailed log." / "No warnings …"
_WARNINGS = re.compile(r"^(?P<count>\d+) warnings? encountered", re.MULTILINE)
_ERRORS = re.compile(r"^(?P<count>\d+) errors? encountered", re.MULTILINE)
_METRIC = {
    "latency": "e2el_ms",
    "first token latency": "ttft_ms",
    "time to output token": "tpot_ms",
}
DEFINITIONS = {
    "tokens_per_second": "LoadGen's (completed) tokens per second: output tokens / duration.",
    "ttft": "First-token latency, from the query's issue by LoadGen (ns).",
    "tpot": "Time per output token: (latency - first token latency) / (tokens - 1) per query (ns).",
}
DIFFERENCES = [
    DefinitionDifference(
        metric="output_throughput",
        theirs="LoadGen's scenario (Server: Poisson arrivals at target_qps under TTFT and TPOT limits; Offline: every query at once)",
        ours="closed-loop concurrency or a request rate per sweep point",
        effect="one operating point per scenario, chosen by the submitter, not a sweep",
    ),
    DefinitionDifference(
        metric="*",
        theirs="the benchmark's own dataset and model (e.g. OpenOrca with Llama-2-70B), accuracy-gated",
        ours="the POC's workload",
        effect="compare only where model, dataset and lengths match; otherwise read as context",
    ),
]


def _summary(path: Path) -> tuple[dict[str, str], str]:
    """The summary's ``key : value`` fields, and its text (its closing lines say more)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ResultImportError(f"{path}: not text (an MLPerf summary is text)") from None
    except OSError as exc:
        raise ResultImportError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if "MLPerf Results Summary" not in text:
        raise ResultImportError(
            f"{path}: not an MLPerf LoadGen summary (no 'MLPerf Results Summary')"
        )
    found: dict[str, str] = {}
    for line in text.splitlines():
        if m := _LINE.match(line):
            found.setdefault(m["key"].strip(), m["value"])
    return found, text


def _reported(text: str) -> list[str]:
    """What LoadGen's closing lines say went wrong (the details are in its detailed log)."""
    said = []
    if warned := _WARNINGS.search(text):
        said.append(
            f"LoadGen reported {warned['count']} warning(s) in its detailed log "
            "(mlperf_log_detail.txt), which this summary does not hold"
        )
    if errors := _ERRORS.search(text):
        said.append(f"LoadGen reported {errors['count']} error(s) during the test")
    return said


def _number(fields: dict[str, str], *keys: str) -> float | None:
    for key in keys:
        if key in fields:
            try:
                return float(fields[key])
            except ValueError:
                return None
    return None


def parse(paths: list[Path], workload: str, gpus: int | None = None) -> Imported:
    result = ServingResult(
        workload=workload,
        tool=TOOL,
        source_file=", ".join(p.name for p in paths),
        gpus=gpus,
        definitions=DEFINITIONS,
        differences=DIFFERENCES,
    )
    for path in paths:
        fields, text = _summary(path)
        scenario = fields.get("Scenario")
        tokens = _number(fields, "Completed tokens per second", "Tokens per second")
        if scenario is None or tokens is None:
            raise ResultImportError(
                f"{path}: an MLPerf summary without a scenario or tokens per second "
                "(only the LLM benchmarks report tokens)"
            )
        samples = _number(fields, "Completed samples per second", "Samples per second")
        metrics: dict[str, dict[str, float | None]] = {"output_throughput": {"value": tokens}}
        if samples is not None:
            metrics["request_throughput"] = {"value": samples}
        if gpus:
            metrics["output_throughput_per_gpu"] = {"value": tokens / gpus}
        for key, value in fields.items():
            if not (m := _STAT.match(key)):
                continue
            stat = (m["word"] or "").lower() or f"p{float(m['pct']):g}"
            stat = {"p50": "median"}.get(stat, stat)
            metrics.setdefault(_METRIC[m["what"].lower()], {})[stat] = float(value) / 1e6
        tpot = metrics.get("tpot_ms", {}).get("median")
        if tpot:
            metrics["interactivity"] = {"median": 1000.0 / tpot}
        valid = fields.get("Result is", "").upper() == "VALID"
        caveats = (
            [] if valid else [f"LoadGen marked this run {fields.get('Result is', 'not VALID')}"]
        )
        limits = [
            f"{name} limit {float(fields[key]) / 1e6:g} ms"
            for name, key in (("TTFT", "ttft_latency (ns)"), ("TPOT", "tpot_latency (ns)"))
            if key in fields
        ]
        if limits and scenario != "Offline":
            caveats.append(f"MLPerf {scenario} scenario: {', '.join(limits)}")
        caveats += _reported(text)
        result.points.append(
            ServingPoint(
                id=scenario.lower(),
                mode="rate" if scenario == "Server" else "unknown",
                value=_number(fields, "target_qps") if scenario == "Server" else None,
                status="ok" if valid else "failed",
                metrics=metrics,
                caveats=caveats,
            )
        )
        if fields.get("SUT name"):
            result.notes.append(f"{path.name}: SUT {fields['SUT name']}, {scenario}")
    result.points = sort_points(result.points)
    return Imported(tool=TOOL, serving=[result])
