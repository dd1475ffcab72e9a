"""The report vLLM's and SGLang's serving benchmarks print, as it is pasted into issues,
READMEs, recipes and chat: the shape most peer results really come in.

Both tools print a block framed by ``=== Serving Benchmark Result ===`` and a line of ``=``::

    ============ Serving Benchmark Result ============
    Successful requests:                     100
    Failed requests:                         0
    Maximum request concurrency:             32
    Benchmark duration (s):                  52.76
    ...
    ---------------Time to First Token----------------
    Mean TTFT (ms):                          1228.72
    Median TTFT (ms):                        952.25
    P99 TTFT (ms):                           2925.25
    ...
    ==================================================

one ``Label: value`` line per number, the statistics of each metric under a dashed rule.
Which tool printed a block is told by its lines: SGLang's ``bench_serving`` opens with
``Backend:`` (and names end-to-end latency ``E2E Latency``), vLLM's ``benchmark_serving`` /
``vllm bench serve`` does not. The layouts of both changed over releases (vLLM added
``Failed requests``, ``Maximum request concurrency``, ``Request rate configured (RPS)`` and
the peak lines inside the block; older releases printed the load point just above it, as
``Traffic request rate:`` and ``Maximum request concurrency:``), so lines are read by label,
and a label this reader does not know is named in a note, not guessed.

What the printed report cannot give is said on every point: values rounded to 0.01 (as
printed), no per-request data (so verdicts are point verdicts), no tool version. A block
cut before its closing rule imports what it has, said; a template (``xxx.xx``,
``<value>``) or a value that is not a number is refused naming the line. Lines may carry a
prefix, stripped first: ``mpirun --tag-output``, ``srun --label``, ``kubectl logs
--prefix/--timestamps`` (the launchers' prefixes of :mod:`nccl_table`), Python logging's
``2026-03-19 20:42:17,548 - INFO - `` and indentation (a report quoted in Markdown or YAML).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from pocforge.results.importers.common import (
    ResultImportError,
    add_interactivity,
    keep_apart,
    point_id,
    renamed,
)
from pocforge.results.importers.nccl_table import PREFIX as LAUNCHER_PREFIX
from pocforge.results.stage_schema import ServingPoint

HEADER = re.compile(r"^=+\s*Serving Benchmark Result\s*=+$")
CLOSING = re.compile(r"^={10,}$")
LOGGING = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} - \w+ - ")
LINE = re.compile(r"^(?P<label>[A-Za-z][^:]*?)\s*:\s+(?P<value>\S.*?)\s*$")
NUMBER = re.compile(r"^-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?$")
# statistic lines (labels are read lower-cased): "Mean TTFT (ms)", "P99 E2E Latency (ms)"
STAT = re.compile(r"^(?P<stat>mean|median|std|max|min|p\d+(?:\.\d+)?)\s+(?P<metric>.+?)\s+\(ms\)$")
METRICS = {
    "ttft": "ttft_ms",
    "tpot": "tpot_ms",
    "itl": "itl_ms",
    "e2el": "e2el_ms",
    "e2e latency": "e2el_ms",
}
SCALARS = {
    "request throughput (req/s)": "request_throughput",
    "request goodput (req/s)": "goodput",
    "output token throughput (tok/s)": "output_throughput",
    "total token throughput (tok/s)": "total_token_throughput",
    "total throughput (tok/s)": "total_token_throughput",  # SGLang of 2024
}
COUNTS = {"successful requests", "failed requests", "benchmark duration (s)"}
# labels that set the load point: inside the block, or (older vLLM) just above it
CONCURRENCY = {
    "maximum request concurrency",
    "max request concurrency",
    "max reqeuest concurrency",  # SGLang's spelling until 2025
}
RATE = {"traffic request rate", "request rate configured (rps)"}
# read and deliberately not kept: token totals, SGLang's input throughput and mean
# in-flight concurrency, vLLM's peaks and the burstiness of its arrival process
KNOWN = {
    "backend", "total input tokens", "total input text tokens", "total input vision tokens",
    "total generated tokens", "total generated tokens (retokenized)",
    "input token throughput (tok/s)", "concurrency", "peak output token throughput (tok/s)",
    "peak concurrent requests", "burstiness factor",
}  # fmt: skip
UNSET = {"not set", "none", "inf"}
PRINTED = (
    "read from the printed report: values as rounded there (0.01), no per-request data "
    "(point verdicts only), no tool version"
)


@dataclass
class Block:
    """One printed report: its lines by label, where it started, whether it was closed."""

    line: int
    # lower-cased label -> (value, line number, the label as printed)
    values: dict[str, tuple[str, int, str]] = field(default_factory=dict)
    closed: bool = False
    above: dict[str, tuple[str, int, str]] = field(default_factory=dict)
    # text after a number on its line: someone's mark on a pasted report, left out and said
    annotations: list[str] = field(default_factory=list)

    @property
    def tool(self) -> str:
        return "sglang" if "backend" in self.values else "vllm"


def clean(raw: str) -> str:
    """A printed line without its launcher or logging prefix and indentation."""
    line = LOGGING.sub("", LAUNCHER_PREFIX.sub("", raw.rstrip("\r\n")))
    return line.strip()


def blocks(text: str) -> list[Block]:
    """Every report in ``text``, in order; each with the load-point lines printed above it
    since the previous one ended."""
    found: list[Block] = []
    above: dict[str, tuple[str, int, str]] = {}
    current: Block | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = clean(raw)
        if HEADER.match(line):
            current = Block(line=number, above=above)
            found.append(current)
            above = {}
            continue
        if current is not None and CLOSING.match(line):
            current.closed, current = True, None
            continue
        match = LINE.match(line)
        if not match:
            continue
        printed = match["label"].strip()
        label = printed.lower()
        value = match["value"]
        first, _, rest = value.partition(" ")
        if NUMBER.match(first.replace(",", "")) and rest.strip():
            # a number with the author's mark after it ("27.44   <========" in a thread)
            value = first
            if current is not None:
                current.annotations.append(f"line {number}: {rest.strip()!r} after {printed}")
        if current is not None:
            current.values.setdefault(label, (value, number, printed))
        elif label in CONCURRENCY | RATE:
            above[label] = (value, number, printed)
    return found


def _number(path: Path, label: str, value: str, line: int) -> float:
    if not NUMBER.match(value.replace(",", "")):
        raise ResultImportError(
            f"{path}:{line}: {label!r} is {value!r}, not a number: a report template, not a "
            "run's output (or a line this reader cannot read)"
        )
    return float(value.replace(",", ""))


def _setting(path: Path, block: Block, labels: set[str]) -> float | None:
    """The load setting a block names (inside it, else just above it); ``not set``/``inf``
    is none."""
    for source in (block.values, block.above):
        for label in labels:
            if label in source:
                value, line, printed = source[label]
                if value.strip().lower() in UNSET:
                    return None
                return _number(path, printed, value, line)
    return None


def point(path: Path, block: Block, gpus: int | None = None) -> tuple[ServingPoint, list[str]]:
    """One report as a point, and the labels it holds that this reader does not know."""
    if "successful requests" not in block.values:
        raise ResultImportError(
            f"{path}:{block.line}: a Serving Benchmark Result with no 'Successful requests' "
            "line: not a report this reader knows"
        )
    conc = _setting(path, block, CONCURRENCY)
    rate = _setting(path, block, RATE)
    pid, mode, value = point_id(conc, rate)
    metrics: dict[str, dict[str, float | None]] = {}
    unknown = []
    numbers = {}
    for label, (text, line, printed) in block.values.items():
        if label in CONCURRENCY | RATE:
            continue
        stat = STAT.match(label)
        if stat and stat["metric"] in METRICS:
            metrics.setdefault(METRICS[stat["metric"]], {})[stat["stat"]] = _number(
                path, printed, text, line
            )
        elif label in SCALARS:
            metrics[SCALARS[label]] = {"value": _number(path, printed, text, line)}
        elif label in COUNTS:
            numbers[label] = _number(path, printed, text, line)
        elif label not in KNOWN:
            unknown.append(printed)
        elif label != "backend":  # a template's placeholder is refused here too
            _number(path, printed, text, line)
    completed = int(numbers["successful requests"])
    failed = numbers.get("failed requests")
    if failed is not None and completed + failed:
        metrics["error_rate"] = {"value": failed / (completed + failed)}
    if gpus and "output_throughput" in metrics:
        metrics["output_throughput_per_gpu"] = {
            "value": (metrics["output_throughput"]["value"] or 0.0) / gpus
        }
    add_interactivity(metrics)
    caveats = [PRINTED]
    if not block.closed:
        caveats.append(
            f"the report of line {block.line} is cut before its closing rule: its last "
            "section(s) may be missing"
        )
    duration = numbers.get("benchmark duration (s)")
    found = ServingPoint(
        id=pid,
        mode=mode,
        value=value,
        requests=completed,
        failed=int(failed) if failed is not None else None,
        duration_s=duration,
        metrics=metrics,
        caveats=caveats,
    )
    return found, unknown


def holds_report(text: str) -> bool:
    """Whether a result file's text holds a printed report (not a JSON result)."""
    return any(HEADER.match(clean(line)) for line in text.splitlines())


def parse_text(
    path: Path, text: str, tool: str, gpus: int | None = None
) -> tuple[list[ServingPoint], list[str]]:
    """The points of every ``tool`` report in ``text`` and the result's notes; a report of
    the other tool is refused naming the format to use."""
    found = blocks(text)
    if not found:
        raise ResultImportError(f"{path}: no 'Serving Benchmark Result' report in the text")
    points: list[ServingPoint] = []
    backends: list[str] = []
    notes: list[str] = []
    for block in found:
        if block.tool != tool:
            other = "SGLang's bench_serving" if block.tool == "sglang" else "vLLM's"
            raise ResultImportError(
                f"{path}:{block.line}: this report is {other} (it "
                f"{'names' if block.tool == 'sglang' else 'has no'} 'Backend:'): import it "
                f"with --format {block.tool}"
            )
        if not block.values and not block.closed:  # the paste ends inside the header
            notes.append(f"line {block.line}: a report cut before its first figure, left out")
            continue
        found_point, unknown = point(path, block, gpus)
        if unknown:
            notes.append(f"line {block.line}: not read: {', '.join(unknown)}")
        notes += [f"{a}: left out (not the tool's)" for a in block.annotations]
        points.append(found_point)
        backends.append(block.values.get("backend", ("", 0, ""))[0])
    return keep_apart(_by_backend(points, backends), notes), notes


def _by_backend(points: list[ServingPoint], backends: list[str]) -> list[ServingPoint]:
    """Reports at one load point against different endpoints (SGLang's ``Backend:``: a
    text run on ``sglang`` and an image run on ``sglang-oai-chat``) are told apart by it:
    ``c1-sglang``, ``c1-sglang-oai-chat``."""
    out = []
    for point, backend in zip(points, backends, strict=True):
        peers = {b for p, b in zip(points, backends, strict=True) if p.id == point.id}
        out.append(renamed(point, f"{point.id}-{backend}") if len(peers) > 1 else point)
    return out
