"""nccl-tests / rccl-tests text output (``all_reduce_perf`` and friends) -> CollectiveResult.

Reads the rank lines (``#  Rank  0 Group 0 Pid … on HOST device 0 [bus] NAME``) for ranks,
nodes and devices, the table rows (size, count, type, redop, root, then out-of-place and
in-place time/algbw/busbw/#wrong; ``N/A`` when validation was off), and the trailer
(``# Avg bus bandwidth``, ``# Out of bounds values``). busbw follows nccl-tests' own
definition (algbw scaled by the collective's factor, e.g. 2(n-1)/n for all-reduce), which
is ours too.
"""

from __future__ import annotations

import re
from pathlib import Path

from pocforge.results.importers.common import Imported, ResultImportError
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
_RANK = re.compile(
    # "Group N" is absent from older rccl-tests' rank lines.
    r"^#\s+Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+\s+\[[^\]]*\]\s+(.*)$"
)
_NUM = r"[-+0-9.eE]+"
_ROW = re.compile(
    rf"^\s*(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(-?\d+)\s+({_NUM})\s+({_NUM})\s+({_NUM})\s+(\S+)"
    rf"\s+({_NUM})\s+({_NUM})\s+({_NUM})\s+(\S+)\s*$"
)
_ROW_NO_REDOP = re.compile(
    rf"^\s*(\d+)\s+(\d+)\s+(\w+)\s+({_NUM})\s+({_NUM})\s+({_NUM})\s+(\S+)"
    rf"\s+({_NUM})\s+({_NUM})\s+({_NUM})\s+(\S+)\s*$"
)


def _wrong(text: str) -> int | None:
    return int(text) if text.isdigit() else None


def parse_text(text: str, name_hint: str = "", source: str | None = None) -> CollectiveResult:
    ranks: dict[int, tuple[str, str]] = {}
    rows: list[CollectiveRow] = []
    collective = version = None
    avg = oob = None
    for line in text.splitlines():
        if m := _RANK.match(line):
            ranks[int(m.group(1))] = (m.group(2), m.group(3).strip())
        elif m := re.search(r"Collective test starting:\s*(\w+?)(?:_perf)?\s*$", line):
            collective = m.group(1)
        elif m := re.match(r"^(?:#\s*)?(nccl-tests version \S+|rccl-tests: Version \S+)", line):
            version = m.group(1)
        elif m := re.search(r"Avg bus bandwidth\s*:\s*(" + _NUM + ")", line):
            avg = float(m.group(1))
        elif m := re.search(r"Out of bounds values\s*:\s*(\d+)", line):
            oob = int(m.group(1))
        elif not line.lstrip().startswith("#") and (m := _ROW.match(line)):
            g = m.groups()
            rows.append(
                CollectiveRow(
                    bytes=int(g[0]),
                    count=int(g[1]),
                    dtype=g[2],
                    redop=g[3],
                    time_us=float(g[5]),
                    algbw_gbs=float(g[6]),
                    busbw_gbs=float(g[7]),
                    wrong=_wrong(g[8]),
                    inplace_time_us=float(g[9]),
                    inplace_algbw_gbs=float(g[10]),
                    inplace_busbw_gbs=float(g[11]),
                    inplace_wrong=_wrong(g[12]),
                )
            )
        elif not line.lstrip().startswith("#") and (m := _ROW_NO_REDOP.match(line)):
            g = m.groups()
            rows.append(
                CollectiveRow(
                    bytes=int(g[0]),
                    count=int(g[1]),
                    dtype=g[2],
                    redop="none",
                    time_us=float(g[3]),
                    algbw_gbs=float(g[4]),
                    busbw_gbs=float(g[5]),
                    wrong=_wrong(g[6]),
                    inplace_time_us=float(g[7]),
                    inplace_algbw_gbs=float(g[8]),
                    inplace_busbw_gbs=float(g[9]),
                    inplace_wrong=_wrong(g[10]),
                )
            )
    if not rows:
        raise ResultImportError(f"{source or 'input'}: no nccl-tests/rccl-tests result rows found")
    if collective is None:
        hint = name_hint.lower()
        collective = next(
            (c for c in COLLECTIVES if c in hint or c.replace("_", "") in hint), "unknown"
        )
    is_rccl = (version or "").startswith("rccl") or "rccl" in name_hint.lower() or "RCCL" in text
    tool = "rccl-tests" if is_rccl else "nccl-tests"
    if "# pocforge gloo_perf" in text:  # the kit's CPU benchmark prints nccl-tests' table
        tool = "pocforge-gloo"
    return CollectiveResult(
        tool=tool,
        tool_version=version,
        collective=collective,
        ranks=len(ranks),
        nodes=len({host for host, _ in ranks.values()}),
        devices=sorted({dev for _, dev in ranks.values()}),
        rows=rows,
        avg_busbw_gbs=avg,
        out_of_bounds=oob,
        source_file=source,
    )


def parse(paths: list[Path], workload: str = "", gpus: int | None = None) -> Imported:
    results = []
    for path in paths:
        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise ResultImportError(f"{path}: cannot read: {exc.strerror or exc}") from None
        results.append(parse_text(text, Path(path).name, Path(path).name))
    return Imported(tool=results[0].tool if results else "nccl-tests", collectives=results)
