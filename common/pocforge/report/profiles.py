"""The dashboard's "Profiles" part of a serving workload: what the framework's torch profiler
wrote for each profiled point (``serving.workloads[].profile``, :mod:`pocforge.runner.profile`),
kept in the run as ``serving/<workload>/profile-<point>/``.

Per process the profiler writes a Chrome trace (vLLM ``<process>.<n>.pt.trace.json.gz``,
SGLang ``<id>-TP-<rank>.trace.json.gz``): the page links each one, relative to the run
folder the dashboard sits in, for Perfetto, which opens gzipped JSON traces as they are
(its trace processor unzips them itself, ``src/trace_processor/importers/gzip``; vLLM's
profiling guide: "no need to untar the traces, they can be viewed directly"). vLLM also
writes per process the profiler's table of the top operations (``<process>.profiler_out.txt``,
torch's ``key_averages().table()``), whose first :data:`TOP` rows the page shows.

Torch's table, as ``torch/autograd/profiler_util.py`` prints it and vLLM 0.32 wrote it here
(tests/data/report/profile/): a rule of dashes per column, the header, a rule, one row per
operation, a rule, then ``Self CPU time total: 705.004ms`` (and ``Self CUDA time total`` on
a GPU run). The name column is cut to its rule's width; the other cells are right-aligned
and two spaces apart, but a header may overflow its rule ("CUDA time avg" is 13 characters
over a rule of 12), so cells are split on those two spaces, not cut at the rules.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from pocforge.frameworks.process import (
    PROFILE_TABLE_SUFFIX,
    PROFILE_TRACE_SUFFIXES,
    is_kernel_summary,
)
from pocforge.report import kernel_stats
from pocforge.results.schema import ServingResult

PREFIX = "profile-"  # serving/<workload>/profile-<point>/ (pocforge.runner.profile)
TRACE_SUFFIXES = PROFILE_TRACE_SUFFIXES
TABLE_SUFFIX = PROFILE_TABLE_SUFFIX
TOP = 10
NAME = "Name"
# torch's columns the page keeps, in its order (CUDA ones only on a GPU run)
COLUMNS = ("Self CPU %", "Self CPU", "CPU total", "Self CUDA", "CUDA total", "# of Calls")
RULE = re.compile(r"^-+(?:  -+)*\s*$")
TOTAL = re.compile(r"^(Self \S+ time total): (\S+)\s*$")
GAP = re.compile(r"\s{2,}")
UNITS = ("B", "KB", "MB", "GB")


@dataclass
class OpsTable:
    """The top of torch's table: ``columns`` of :data:`COLUMNS` that its header has, a row
    per operation (``Name`` and those columns, torch's own text: ``352.495ms``, ``50.00%``),
    and the totals under it (``("Self CPU time total", "705.004ms")``)."""

    columns: list[str] = field(default_factory=list)
    rows: list[dict[str, str]] = field(default_factory=list)
    totals: list[tuple[str, str]] = field(default_factory=list)


def _cells(line: str, width: int) -> list[str]:
    """The name (the first ``width`` characters) and the other cells of a table line."""
    rest = line[width:].strip()
    return [line[:width].strip(), *(GAP.split(rest) if rest else [])]


def parse_table(text: str, top: int = TOP) -> OpsTable:
    """The first ``top`` rows of a ``key_averages().table()`` text (a row whose cells do not
    match the header's is left out); an empty table for text that is not one (no rules
    around a header, or a header without ``Name``)."""
    lines = text.splitlines()
    start = next(
        (
            i
            for i in range(len(lines) - 2)
            if RULE.match(lines[i]) and RULE.match(lines[i + 2]) and lines[i + 1].strip()
        ),
        None,
    )
    if start is None:
        return OpsTable()
    width = len(lines[start]) - len(lines[start].lstrip("-"))  # the name column's rule
    header = _cells(lines[start + 1], width)
    if header[0] != NAME:
        return OpsTable()
    table = OpsTable(columns=[c for c in COLUMNS if c in header])
    end = start + 3
    while end < len(lines) and not RULE.match(lines[end]):
        cells = _cells(lines[end], width)
        if len(table.rows) < top and len(cells) == len(header) and cells[0]:
            row = dict(zip(header, cells, strict=True))
            table.rows.append({c: row[c] for c in (NAME, *table.columns)})
        end += 1
    for line in lines[end + 1 :]:
        found = TOTAL.match(line)
        if found:
            table.totals.append((found[1], found[2]))
    return table


def read_table(path: Path, top: int = TOP) -> OpsTable:
    """:func:`parse_table` of a file; an empty table for one that cannot be read."""
    try:
        return parse_table(path.read_text(encoding="utf-8", errors="replace"), top)
    except OSError:
        return OpsTable()


def size(n: int) -> tuple[int | float, str]:
    """A file size in decimal units: ``(312, "B")``, ``(2.729565, "MB")``."""
    for k, unit in enumerate(UNITS):
        if n < 1000 ** (k + 1) or unit == UNITS[-1]:
            return (n, unit) if k == 0 else (n / 1000**k, unit)
    raise AssertionError("unreachable")


def _link(path: Path, run_path: Path) -> dict[str, Any]:
    """A file's name, its link from a page at the run folder's root, and its size."""
    value, unit = size(path.stat().st_size)
    href = quote(Path(os.path.relpath(path, run_path)).as_posix())
    return {"name": path.name, "href": href, "size": value, "unit": unit}


def points(result: ServingResult, folder: Path | None, run_path: Path) -> list[dict[str, Any]]:
    """One entry per ``profile-<point>`` folder of the workload, in the sweep's order of
    points (folders of no point of the sweep after them, by name): its traces and its
    tables of top operations (each file linked, with its size), none for a workload that
    was not profiled."""
    if folder is None or not folder.is_dir():
        return []
    found = {
        p.name[len(PREFIX) :]: p
        for p in folder.iterdir()
        if p.is_dir() and p.name.startswith(PREFIX)
    }
    swept = [p.id for p in result.points if p.id in found]
    return [
        _entry(point, found[point], run_path) for point in swept + sorted(set(found) - set(swept))
    ]


def training(folder: Path | None, steps: list[int], run_path: Path) -> list[dict[str, Any]]:
    """The training stage's profile (``training/profile/``: a trace and a table per rank,
    :func:`pocforge.training.driver.save_profile`) as one entry named for its steps; none
    when training was not profiled."""
    if folder is None or not folder.is_dir():
        return []
    label = f"{min(steps)}–{max(steps)}" if len(set(steps)) > 1 else f"{steps[0]}" if steps else "?"
    return [_entry(label, folder, run_path)]


def ops(folder: Path | None, order: list[str], run_path: Path) -> list[dict[str, Any]]:
    """The kernel benchmark's profiles (``kernels/profiles/<op>/``: each op's GPU profiler
    summary, imported from ``scripts/gpu-kernels.sh``), one entry per op in ``order`` (the
    results' own) and then any other by name; none without the folder."""
    if folder is None or not folder.is_dir():
        return []
    found = {p.name: p for p in folder.iterdir() if p.is_dir()}
    named = list(dict.fromkeys(op for op in order if op in found))
    return [_entry(op, found[op], run_path) for op in named + sorted(set(found) - set(named))]


def _entry(name: str, folder: Path, run_path: Path) -> dict[str, Any]:
    # recursive: Megatron-LM's trace handlers write in folders of their own under it
    files = sorted(f for f in folder.rglob("*") if f.is_file())
    return {
        "id": name,
        "traces": [_link(f, run_path) for f in files if f.name.endswith(TRACE_SUFFIXES)],
        "tables": [
            {**_link(f, run_path), "table": read_table(f)}
            for f in files
            if f.name.endswith(TABLE_SUFFIX)
        ],
        "kernels": [_kernels(f, run_path) for f in files if is_kernel_summary(f)],
    }


def _kernels(path: Path, run_path: Path) -> dict[str, Any]:
    """A GPU profiler's kernel summary (nsys, rocprofv3): its top kernels and the share of
    the kernel time per category; ``table`` None for a file that does not read."""
    table = kernel_stats.read(path)
    return {
        **_link(path, run_path),
        "table": table,
        "rows": table.top() if table else [],
        "categories": table.by_category() if table else [],
    }
