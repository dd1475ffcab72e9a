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
The tables are read by :mod:`pocforge.report.ops_table`; a trace without its table gets one
summed by the kit from the trace (:mod:`pocforge.report.trace_ops`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

from pocforge.frameworks.profilers import TABLE_SUFFIX, TRACE_SUFFIXES, is_kernel_summary
from pocforge.report import kernel_stats, trace_ops
from pocforge.report.ops_table import TOP, OpsTable, read_table
from pocforge.results.stage_schema import ServingResult

PREFIX = "profile-"  # serving/<workload>/profile-<point>/ (pocforge.runner.profile)
UNITS = ("B", "KB", "MB", "GB")
CPU_TOTAL = "Self CPU time total"  # torch's table's one total on a run of no device


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
    traces = [f for f in files if f.name.endswith(TRACE_SUFFIXES)]
    tables = {f: read_table(f) for f in files if f.name.endswith(TABLE_SUFFIX)}
    summed = []
    for trace in traces:
        table = _table_of(trace, tables)
        if table is None or _device_timed(table):
            summed.append(_summed(trace, run_path, covered=table is not None))
    return {
        "id": name,
        "traces": [_link(f, run_path) for f in traces],
        "tables": [{**_link(f, run_path), "table": t} for f, t in tables.items()]
        + [s["ops"] for s in summed if s["ops"]],
        "kernels": [_kernels(f, run_path) for f in files if is_kernel_summary(f)]
        + [s["kernels"] for s in summed if s["kernels"]],
    }


def _table_of(trace: Path, tables: dict[Path, OpsTable]) -> OpsTable | None:
    """The table the framework wrote for the process of ``trace`` (vLLM's
    ``rank0.profiler_out.txt`` beside ``rank0.<n>.pt.trace.json.gz``), None where it wrote none."""
    return next(
        (
            table
            for t, table in tables.items()
            if t.parent == trace.parent
            and trace.name.startswith(t.name[: -len(TABLE_SUFFIX)] + ".")
        ),
        None,
    )


def _device_timed(table: OpsTable) -> bool:
    """Whether the trace under a framework's table may hold GPU kernels, so is worth reading
    for them: its table has a device's total (``Self CUDA time total``, ROCm's torch names it
    CUDA too) or no totals at all (a table that did not read says nothing). A CPU run's
    covered trace is not read: its table already says all the page shows of it, and summing
    it costs about a second per 2 MB."""
    return not table.totals or any(total != CPU_TOTAL for total, _ in table.totals)


def _summed(trace: Path, run_path: Path, covered: bool) -> dict[str, Any]:
    """What the kit sums from a trace (:mod:`pocforge.report.trace_ops`): its table of
    operations where the framework wrote none for its process (else None), and its GPU
    kernels by time where it holds any; a trace that does not read gets, where it has no
    table, an empty one with the reason."""
    link = _link(trace, run_path)
    try:
        summary = trace_ops.summarize(trace, TOP)
    except trace_ops.TraceError as exc:
        ops = None if covered else {**link, "table": OpsTable(), "summed": True, "error": str(exc)}
        return {"ops": ops, "kernels": None}
    kernels = summary.kernels
    return {
        "ops": None if covered else {**link, "table": summary.ops, "summed": True},
        "kernels": kernels
        and {
            **link,
            "table": kernels,
            "rows": kernels.top(),
            "categories": kernels.by_category(),
        },
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
