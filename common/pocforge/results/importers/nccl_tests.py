"""nccl-tests / rccl-tests text output (``all_reduce_perf`` and friends) -> CollectiveResult.

The kit's one reader of that output (:mod:`~pocforge.results.importers.nccl_table`) finds
each run in a file, whatever the version's table layout and the launcher's prefixes; each
run becomes a result of its own (a file of 1-, 2-, 4- and 8-node runs gives four, never
one with duplicate sizes). busbw follows nccl-tests' own definition (algbw scaled by the
collective's factor, e.g. 2(n-1)/n for all-reduce), which is ours too. What a result cannot
say exactly is in its ``notes``: a table cut before its trailer, an ``error`` column.
"""

from __future__ import annotations

from pathlib import Path

from pocforge.results.importers.common import Imported, ResultImportError
from pocforge.results.importers.nccl_table import TableRun, read_runs
from pocforge.results.stage_schema import CollectiveResult, CollectiveRow

COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "alltoall",
    "reduce_scatter",
    "broadcast",
    "reduce",
    "sendrecv",
    "gather",
    "scatter",
    "hypercube",
)
TOOLS = ("nccl-tests", "rccl-tests")


def _collective(run: TableRun, name_hint: str) -> str:
    if run.collective:
        return run.collective
    hint = name_hint.lower()
    return next((c for c in COLLECTIVES if c in hint or c.replace("_", "") in hint), "unknown")


def _tool(run: TableRun, text: str, name_hint: str, tool: str | None) -> str:
    """The tool the output names itself (its version line), else the format named on the
    command line, else what the file's name or text suggests."""
    if "# pocforge gloo_perf" in text:  # the kit's CPU benchmark prints nccl-tests' table
        return "pocforge-gloo"
    if run.version:
        return run.version.split()[0]
    if tool is not None:
        return tool
    return "rccl-tests" if "rccl" in name_hint.lower() or "RCCL" in text else "nccl-tests"


def _notes(run: TableRun, tool: str | None) -> list[str]:
    notes = []
    said = run.version.split()[0] if run.version else None
    if tool is not None and said is not None and said != tool:
        notes.append(f"imported as {tool}, but the output names itself {run.version}")
    if not run.counts_wrong:
        notes.append(
            "a table of nccl-tests before 2.10: its 'error' column is the largest numerical "
            "error, not a count of wrong values; wrong is 1 where it was starred (above "
            "tolerance), else 0"
        )
    if not run.finished:
        notes.append(
            "the table ends before its trailer (no '# Avg bus bandwidth' line): the run may "
            "have been cut short, its largest sizes missing"
        )
    return notes


def _result(run: TableRun, text: str, name_hint: str, tool: str | None, source: str | None):
    return CollectiveResult(
        tool=_tool(run, text, name_hint, tool),  # type: ignore[arg-type]
        tool_version=run.version.split()[1] if run.version else None,
        collective=_collective(run, name_hint),
        ranks=len(run.ranks),
        nodes=len({rank["host"] for rank in run.ranks}),
        devices=sorted({rank["device"] for rank in run.ranks if rank["device"]}),
        rows=[
            CollectiveRow(
                bytes=row["size"],
                count=row["count"],
                dtype=row["type"],
                redop=row["redop"],
                time_us=row["out_of_place"]["time_us"],
                algbw_gbs=row["out_of_place"]["algbw"],
                busbw_gbs=row["out_of_place"]["busbw"],
                wrong=row["out_of_place"]["wrong"],
                inplace_time_us=row["in_place"]["time_us"],
                inplace_algbw_gbs=row["in_place"]["algbw"],
                inplace_busbw_gbs=row["in_place"]["busbw"],
                inplace_wrong=row["in_place"]["wrong"],
            )
            for row in run.rows
        ],
        avg_busbw_gbs=run.avg_busbw,
        out_of_bounds=run.out_of_bounds,
        source_file=source,
        notes=_notes(run, tool),
    )


def parse_runs(
    text: str, name_hint: str = "", source: str | None = None, tool: str | None = None
) -> list[CollectiveResult]:
    """Every run in ``text``, one result each; ``tool`` is the format the user named."""
    runs = [run for run in read_runs(text) if run.rows]
    if not runs:
        raise ResultImportError(f"{source or 'input'}: no nccl-tests/rccl-tests result rows found")
    return [_result(run, text, name_hint, tool, source) for run in runs]


def parse_text(
    text: str, name_hint: str = "", source: str | None = None, tool: str | None = None
) -> CollectiveResult:
    """The one run in ``text`` (several: refused, naming how many; see :func:`parse_runs`)."""
    results = parse_runs(text, name_hint, source, tool)
    if len(results) > 1:
        raise ResultImportError(
            f"{source or 'input'}: {len(results)} runs in one output, where one was expected"
        )
    return results[0]


def parse(
    paths: list[Path], workload: str = "", gpus: int | None = None, tool: str | None = None
) -> Imported:
    """``tool``: ``nccl-tests`` or ``rccl-tests`` as named on the command line (None: as the
    output names itself)."""
    results: list[CollectiveResult] = []
    for path in paths:
        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise ResultImportError(f"{path}: cannot read: {exc.strerror or exc}") from None
        results += parse_runs(text, Path(path).name, Path(path).name, tool)
    return Imported(tool=results[0].tool if results else tool or "nccl-tests", collectives=results)
