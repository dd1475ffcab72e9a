"""Torch's table of operations by time (``key_averages().table()``), as the framework wrote it
beside its trace.

It is read as ``torch/autograd/profiler_util.py`` prints it and vLLM 0.32 wrote it here
(tests/data/report/profile/): a rule of dashes per column, the header, a rule, one row per
operation, a rule, then ``Self CPU time total: 705.004ms`` (and ``Self CUDA time total`` on
a GPU run). The name column is cut to its rule's width; the other cells are right-aligned
and two spaces apart, but a header may overflow its rule ("CUDA time avg" is 13 characters
over a rule of 12), so cells are split on those two spaces, not cut at the rules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

TOP = 10
NAME = "Name"
# torch's columns the page keeps, in its order (CUDA ones only on a GPU run)
COLUMNS = ("Self CPU %", "Self CPU", "CPU total", "Self CUDA", "CUDA total", "# of Calls")
RULE = re.compile(r"^-+(?:  -+)*\s*$")
TOTAL = re.compile(r"^(Self \S+ time total): (\S+)\s*$")
GAP = re.compile(r"\s{2,}")


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
