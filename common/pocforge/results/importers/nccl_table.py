"""nccl-tests / rccl-tests text output as every version and launcher prints it: the one
reader behind the collectives role's checks (each node's output, read on the controller)
and ``pocforge import`` of a peer's log.

Both tools print the same table (rccl-tests is a fork of nccl-tests)::

    #       size         count      type   redop    root     time   algbw   busbw #wrong     time ...
     8589934592    2147483648     float     sum      -1    47617  180.40  315.69      0    47584 ...

one row per message size: an out-of-place and an in-place group of (time us, algbw GB/s,
busbw GB/s, #wrong). The columns are read from the table's own header, so every layout
reads alike: nccl-tests before 2.10 has no ``root`` column (or, for rooted collectives, no
``redop``) and prints ``error``, the largest numerical error, starred above tolerance,
where later versions count ``#wrong``; ``alltoall`` prints ``N/A`` for the in-place count.

Lines may carry a launcher's prefix, stripped first: ``mpirun --tag-output``
(``[1,0]<stdout>:``, the default of Kubeflow's MPIJob), ``srun --label`` (``0: ``) and
``kubectl logs``' own, ``--prefix`` (``[pod/<pod>/<container>] ``) and ``--timestamps``
(RFC 3339 with nanoseconds, ``2023-08-17T07:52:26.131134150Z ``), alone or together.
Engineers grep several runs into one file
(1, 2, 4, 8 nodes): each run is read on its own, split where a run starts (its version,
"Collective test starting" or ``# nThread`` line) or where a table follows a finished one.

Standard library only: the role's filter plugin imports it in Ansible's controller process.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

PREFIX = re.compile(
    r"^(?:\[\d+,\d+\]<std(?:out|err)>:"  # mpirun --tag-output
    r"|\s*\d+: "  # srun --label
    r"|\[pod/[^/\]\s]+/[^\]\s]+\] "  # kubectl logs --prefix: [pod/<pod>/<container>]
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?Z )+"  # kubectl logs --timestamps
)
_RANK = re.compile(r"^#\s*Rank\s+(\d+)\b.*?\bon\s+(\S+)\s+device\s+(\d+)\s+\[([^\]]*)\]\s*(.*)$")
_NUM = re.compile(r"^-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?$")
_VERSION = re.compile(r"(?:#\s*)?(rccl-tests|nccl-tests)(?::\s*Version|\s+version)\s+(\S+)")
_STARTING = re.compile(r"Collective test starting:\s*(\w+)")
_CONCLUDED = re.compile(r"Collective test concluded")
# the header of nccl-tests 2.10 and later (and of every rccl-tests since): the columns of a
# table printed without its header (an author's trim) when its rows have as many
MODERN = ["size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
          "time", "algbw", "busbw", "#wrong"]  # fmt: skip


def number(token: str) -> int | float | None:
    """A table cell as a number (a starred ``error`` without its star), else None."""
    token = token.rstrip("*")
    if not _NUM.match(token):
        return None
    value = float(token)
    whole = value.is_integer() and "." not in token and "e" not in token.lower()
    return int(value) if whole else value


def collective_name(name: str) -> str:
    """The collective a binary measures: ``all_reduce_perf_mpi`` -> ``all_reduce``."""
    return re.sub(r"_perf(?:_mpi)?$", "", name)


@dataclass
class TableRun:
    """One run's output: what it says of itself, its ranks and its table."""

    version: str | None = None  # "nccl-tests 2.18.0", "rccl-tests develop:a7809b3"
    collective: str | None = None
    ranks: list[dict] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)
    rows: list[dict] = field(default_factory=list)
    avg_busbw: float | None = None
    out_of_bounds: int | None = None
    concluded: bool = False

    @property
    def started(self) -> bool:
        """Past its table's header: a start line from here on is the next run's."""
        return bool(self.columns or self.rows)

    @property
    def finished(self) -> bool:
        """Its trailer printed: a row from here on is the next run's."""
        return self.avg_busbw is not None or self.concluded

    @property
    def counts_wrong(self) -> bool:
        """Whether ``wrong`` counts wrong values (#wrong) or flags a starred ``error``."""
        return "#wrong" in (self.columns or MODERN)


def row(tokens: list[str], columns: list[str]) -> dict | None:
    """One data line under ``columns``, else None (not a data line of this table)."""
    if len(tokens) != len(columns) or number(tokens[0]) is None:
        return None
    lead = columns.index("time")  # size count type [redop] [root]
    cells = dict(zip(columns[:lead], tokens[:lead], strict=True))
    out = {
        "size": number(tokens[0]),
        "count": number(tokens[1]),
        "type": tokens[2],
        "redop": cells.get("redop", "none"),
        "root": number(cells["root"]) if "root" in cells else None,
    }
    for placement, start in (("out_of_place", lead), ("in_place", lead + 4)):
        time_us, algbw, busbw, wrong = tokens[start : start + 4]
        if columns[start + 3] == "#wrong":
            wrong_value = None if wrong == "N/A" else number(wrong)
        else:  # "error": the largest numerical error, starred when above tolerance
            wrong_value = None if wrong == "N/A" else int(wrong.endswith("*"))
        out[placement] = {
            "time_us": number(time_us),
            "algbw": number(algbw),
            "busbw": number(busbw),
            "wrong": wrong_value,
        }
    if any(out[p][k] is None for p in ("out_of_place", "in_place") for k in ("time_us", "busbw")):
        return None
    return out


def read_runs(text: str) -> list[TableRun]:
    """Every run in ``text``, in order (runs with neither rows nor a header left out)."""
    runs = [TableRun()]
    for raw in (text or "").splitlines():
        line = PREFIX.sub("", raw).strip()
        run = runs[-1]
        starts = _VERSION.match(line) or _STARTING.search(line) or line.startswith("# nThread")
        if starts and (run.started or run.finished):
            run = TableRun()
            runs.append(run)
        if match := _VERSION.match(line):
            run.version = run.version or f"{match.group(1)} {match.group(2)}"
        elif match := _STARTING.search(line):
            run.collective = collective_name(match.group(1))
        elif _CONCLUDED.search(line):
            run.concluded = True
        elif match := _RANK.match(line):
            rank, host, _device, bus, name = match.groups()
            run.ranks.append(
                {"rank": int(rank), "host": host, "bus_id": bus, "device": name.strip()}
            )
        elif line.startswith("#") and " size " in f" {line[1:]} " and "busbw" in line:
            if run.finished or run.rows:
                run = TableRun()
                runs.append(run)
            run.columns = line.lstrip("#").split()
        elif match := re.match(r"#\s*Avg bus bandwidth\s*:\s*([\d.eE+-]+)", line):
            run.avg_busbw = float(match.group(1))
        elif match := re.match(r"#\s*Out of bounds values\s*:\s*(\d+)", line):
            run.out_of_bounds = int(match.group(1))
        elif line and not line.startswith("#"):
            columns = run.columns or (runs[-2].columns if len(runs) > 1 else []) or MODERN
            parsed = row(line.split(), columns)
            if parsed is None:
                continue
            if run.finished:  # rows after a finished run's trailer: the next run's table
                run = TableRun(columns=run.columns)
                runs.append(run)
            run.columns = run.columns or columns
            run.rows.append(parsed)
    return [run for run in runs if run.rows or run.columns]
