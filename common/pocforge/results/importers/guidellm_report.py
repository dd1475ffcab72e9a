"""GuideLLM's printed report (``guidellm benchmark``, releases 0.2 and 0.3), as it is pasted
into lab guides, READMEs and CI logs: most GuideLLM results from GPU machines come in this
shape, not as the ``benchmarks.json`` the run saved beside it.

The report ends with two tables, each under its title, framed by rules of ``=``::

    Benchmarks Info:
    ==========================================================================...
    Metadata                                      |||| Requests Made  ||| Prompt Tok/Req ...
        Benchmark| Start Time| End Time| Duration (s)|  Comp|  Inc|  Err|   Comp| ...
    -------------|-----------|---------|-------------|------|-----|-----|-------| ...
      synchronous|   20:10:02| 20:12:13|        130.7|    30|    0|    0|  512.3| ...
    ==========================================================================...
    Benchmarks Stats:
    ==========================================================================...
    Metadata     | Request Stats         || Out Tok/sec| Tot Tok/sec| Req Latency (ms)||| ...
        Benchmark| Per Second| Concurrency|        mean|        mean| mean| median|  p99| ...

Each table has two header lines: its groups, each followed by one ``|`` per column it spans
(the last by one fewer, as a row has no closing ``|``), then its columns. Cells are read by
(group, column), never by position, so a release that moves a column reads alike; a table
whose rows do not have the header's cells (wrapped at a terminal's width) is refused.

What the two releases print differently: 0.2 labels request latency ``(ms)`` but prints it in
seconds (vllm-project/guidellm issue #245; 4.36 where the TTFT alone is 59.8 ms), 0.3 labels
it ``(sec)``; both are read as seconds. Throughputs come from the Info table's totals over
the benchmark's duration, as the JSON importer computes them: the Stats table's ``Tok/sec``
columns are means of instantaneous rates (its ``Tot Tok/sec`` of a synchronous stream is 293.7
where its totals give 176.4). A report with no Info table keeps those printed means, said.

The load point of a benchmark (:func:`load_point`) and its rates (:func:`totals_rates`) are
read by one rule here for both forms: the JSON reader (:mod:`guidellm`) calls them too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from pocforge.results.importers.common import ResultImportError, add_interactivity
from pocforge.results.importers.serving_report import clean
from pocforge.results.stage_schema import ServingPoint

TITLE = re.compile(r"^Benchmarks (?P<table>Info|Stats):?$")
RULE = re.compile(r"^={20,}$")
COLUMN_RULE = re.compile(r"^-+(\|-+)+$")
GROUP = re.compile(r"([^|]+)(\|*)")
UNIT = re.compile(r"\((?P<unit>ms|sec)\)")
VERSION = re.compile(r"\bguidellm==(?P<version>\d+\.\d+\.\d+\S*)")  # pip's / uv's install log
MODEL = re.compile(r"\bbackend_model='(?P<model>[^']+)'")
# where the run saved its JSON: 0.2/0.3 print "Benchmarks report saved to <path>", later
# releases list each output ("…   json    : benchmarks.json")
SAVED = re.compile(r"^(?:Benchmarks report saved to|…?\s*json\s+:)\s*(?P<path>\S+)$")
# the report of GuideLLM 0.4 and later, told by the title of its first table
LATER_LAYOUT = "Run Summary Info"
PRINTED = (
    "read from GuideLLM's printed report: values as rounded there, mean, median and p99 "
    "only, no per-request data (point verdicts only)"
)
LATENCY_MS_LABEL = (
    "GuideLLM 0.2 labels request latency '(ms)' but prints it in seconds "
    "(vllm-project/guidellm issue #245): read as seconds"
)


@dataclass
class Table:
    """One printed table: its columns as (group, column) and its rows' cells by column."""

    columns: list[tuple[str, str]] = field(default_factory=list)
    rows: list[tuple[int, dict[tuple[str, str], str]]] = field(default_factory=list)

    def group(self, prefix: str) -> str | None:
        return next((g for g, _ in self.columns if g.startswith(prefix)), None)


def _columns(path: Path, number: int, groups_line: str, names_line: str) -> list[tuple[str, str]]:
    groups = [(name.strip(), len(pipes)) for name, pipes in GROUP.findall(groups_line)]
    names = [name.strip() for name in names_line.split("|")]
    spans = [pipes for _, pipes in groups[:-1]]
    spans.append(len(names) - sum(spans))
    if not groups or groups[0][0] != "Metadata" or names[0] != "Benchmark" or spans[-1] < 1:
        raise ResultImportError(
            f"{path}:{number}: a Benchmarks table whose header does not read as GuideLLM's "
            "(two lines: 'Metadata | …' groups, then 'Benchmark| …' columns); wrapped at a "
            "terminal's width? paste it unwrapped, or import the benchmarks.json the run saved"
        )
    columns = []
    for (group, _), span in zip(groups, spans, strict=True):
        columns += [(group, names[len(columns) + i]) for i in range(span)]
    return columns


def _table(path: Path, lines: list[str], number: int, name: str) -> Table:
    """The table under the title on line ``number`` (1-based) of the cleaned ``lines``."""
    body = [(n, t) for n, t in enumerate(lines[number:], number + 1) if t]
    if len(body) < 4 or not RULE.match(body[0][1]) or not COLUMN_RULE.match(body[3][1]):
        raise ResultImportError(
            f"{path}:{number}: 'Benchmarks {name}' is not followed by GuideLLM's table (a "
            "rule, two header lines, a rule of '-|-'): cut or wrapped? paste the whole "
            "report, or import the benchmarks.json the run saved"
        )
    table = Table(columns=_columns(path, body[1][0], body[1][1], body[2][1]))
    for row_number, row in body[4:]:
        if RULE.match(row) or "|" not in row:
            break
        cells = [cell.strip() for cell in row.split("|")]
        if len(cells) != len(table.columns):
            raise ResultImportError(
                f"{path}:{row_number}: a row of {len(cells)} cells under a header of "
                f"{len(table.columns)}: a table wrapped at a terminal's width? paste it "
                "unwrapped, or import the benchmarks.json the run saved"
            )
        table.rows.append((row_number, dict(zip(table.columns, cells, strict=True))))
    return table


def reports(path: Path, text: str) -> list[tuple[Table | None, Table]]:
    """Every report in ``text``, in order, as its (Info, Stats) tables: reports pasted one
    after another stay apart, each Stats table with the Info table printed before it."""
    lines = [clean(raw) for raw in text.splitlines()]
    found: list[tuple[Table | None, Table]] = []
    info: Table | None = None
    for number, line in enumerate(lines, 1):
        title = TITLE.match(line)
        if title and title["table"] == "Info":
            info = _table(path, lines, number, "Info")
        elif title:
            found.append((info, _table(path, lines, number, "Stats")))
            info = None
    return found


def _number(
    path: Path, line: int, cells: dict[tuple[str, str], str], key: tuple[str, str]
) -> float:
    try:
        return float(cells[key])
    except ValueError:
        raise ResultImportError(
            f"{path}:{line}: {key[0]} {key[1]} is {cells[key]!r}, not a number"
        ) from None


def _stats(
    path: Path, line: int, cells: dict[tuple[str, str], str], stats: Table
) -> dict[str, dict[str, float | None]]:
    """Latencies as printed: GuideLLM's ITL is our TPOT, its TPOT includes the first token
    (the JSON importer's mapping), request latency in seconds."""
    metrics: dict[str, dict[str, float | None]] = {}
    for prefix, ours, scale in (
        ("TTFT", "ttft_ms", 1.0),
        ("ITL", "tpot_ms", 1.0),
        ("TPOT", "tpot_incl_first_ms", 1.0),
        ("Req Latency", "e2el_ms", 1000.0),
    ):
        group = stats.group(prefix)
        if group is None:
            continue
        metrics[ours] = {
            stat: _number(path, line, cells, (group, stat)) * scale
            for stat in ("mean", "median", "p99")
            if (group, stat) in cells
        }
    return metrics


def load_point(kind: str, setting: str) -> tuple[str, str, float | None]:
    """A benchmark's point from its strategy: its kind (``concurrent``, ``constant`` …) and
    setting (streams or rate), as the JSON holds them and the printed report names them
    (``concurrent@8``, ``constant@0.69``); shared with the JSON reader."""
    try:
        number = float(setting) if setting else None
    except ValueError:
        number = None
    if kind == "synchronous":
        return "c1", "concurrency", 1.0
    if kind == "concurrent" and number:
        return f"c{number:g}", "concurrency", number
    if kind in ("constant", "poisson", "async") and number:
        return f"r{number:g}", "rate", number
    return kind, "unknown", None


def totals_rates(
    ok: int,
    errored: int,
    duration: float,
    output_tokens: float | None,
    total_tokens: float | None,
    gpus: int | None,
) -> dict[str, dict[str, float | None]]:
    """GuideLLM's completed requests and tokens over the benchmark's duration (our
    definition of its rates), and its error rate: one rule for its JSON and its report."""
    rates: dict[str, dict[str, float | None]] = {}
    if duration > 0:
        rates["request_throughput"] = {"value": ok / duration}
        if output_tokens is not None:
            rates["output_throughput"] = {"value": output_tokens / duration}
            if gpus:
                rates["output_throughput_per_gpu"] = {"value": output_tokens / duration / gpus}
        if total_tokens is not None:
            rates["total_token_throughput"] = {"value": total_tokens / duration}
    if ok + errored:
        rates["error_rate"] = {"value": errored / (ok + errored)}
    return rates


def _rates(
    path: Path, line: int, info: dict[tuple[str, str], str], gpus: int | None
) -> tuple[dict[str, dict[str, float | None]], int, int, int, float]:
    """Rates from the Info row's totals over the benchmark's duration, and its counts."""
    ok, incomplete, errored = (
        int(_number(path, line, info, ("Requests Made", kind))) for kind in ("Comp", "Inc", "Err")
    )
    duration = _number(path, line, info, ("Metadata", "Duration (s)"))
    output = _number(path, line, info, ("Output Tok Total", "Comp"))
    prompt = _number(path, line, info, ("Prompt Tok Total", "Comp"))
    rates = totals_rates(ok, errored, duration, output, prompt + output, gpus)
    return rates, ok, incomplete, errored, duration


def _printed_rates(
    path: Path, line: int, cells: dict[tuple[str, str], str], gpus: int | None
) -> dict[str, dict[str, float | None]]:
    output = _number(path, line, cells, ("Out Tok/sec", "mean"))
    rates: dict[str, dict[str, float | None]] = {
        "request_throughput": {
            "value": _number(path, line, cells, ("Request Stats", "Per Second"))
        },
        "output_throughput": {"value": output},
        "total_token_throughput": {"value": _number(path, line, cells, ("Tot Tok/sec", "mean"))},
    }
    if gpus:
        rates["output_throughput_per_gpu"] = {"value": output / gpus}
    return rates


def _points(path: Path, info: Table | None, stats: Table, gpus: int | None) -> list[ServingPoint]:
    infos = {cells[("Metadata", "Benchmark")]: (n, cells) for n, cells in info.rows} if info else {}
    points = []
    for line, cells in stats.rows:
        name = cells[("Metadata", "Benchmark")]
        kind, _, setting = name.partition("@")
        pid, mode, value = load_point(kind, setting)
        metrics = _stats(path, line, cells, stats)
        caveats = [PRINTED]
        ok = errored = None
        duration = None
        if name in infos:
            rates, ok, incomplete, errored, duration = _rates(path, *infos[name], gpus)
            if incomplete:
                caveats.append(
                    f"{incomplete} request(s) still running when the benchmark ended: not "
                    "counted (GuideLLM's 'Inc')"
                )
        else:
            rates = _printed_rates(path, line, cells, gpus)
            caveats.append(
                f"no Benchmarks Info row for {name}: request counts, failures and duration "
                "unknown; rates are GuideLLM's printed means of instantaneous rates"
            )
        metrics.update(rates)
        add_interactivity(metrics)
        point = ServingPoint(
            id=pid,
            mode=mode,
            value=value,
            requests=ok,
            failed=errored,
            duration_s=duration,
            metrics=metrics,
            caveats=caveats,
        )
        points.append(point)  # a point no request completed is made 'failed' on import
    return points


def parse_text(
    path: Path, text: str, gpus: int | None = None
) -> tuple[list[ServingPoint], list[str], str | None, str | None]:
    """The points of every report in ``text`` (in order; the caller keeps reruns apart), the
    result's notes, the GuideLLM version (where an install log in the text names it) and the
    model served."""
    found = reports(path, text)
    if not found:
        saved = next(
            (m["path"] for m in map(SAVED.match, map(clean, text.splitlines())) if m), None
        )
        hint = f"import {saved}, the JSON this run saved" if saved else "import its JSON output"
        what = (
            "the report of GuideLLM 0.4 or later, which this reader does not read"
            if LATER_LAYOUT in text
            else "no 'Benchmarks Stats' table"
        )
        raise ResultImportError(f"{path}: {what}: {hint}")
    points: list[ServingPoint] = []
    notes: list[str] = []
    ms_label = False
    for info, stats in found:
        unit = UNIT.search(stats.group("Req Latency") or "")
        ms_label = ms_label or bool(unit and unit["unit"] == "ms")
        points += _points(path, info, stats, gpus)
    if ms_label:
        notes.append(LATENCY_MS_LABEL)
    version = next((m["version"] for m in [VERSION.search(text)] if m), None)
    if version is None:
        notes.append(
            f"no GuideLLM version in the text; the layout is GuideLLM {'0.2' if ms_label else '0.3'}'s"
        )
    model = next((m["model"] for m in [MODEL.search(text)] if m), None)
    return points, notes, version, model
