"""Parse rccl-tests / nccl-tests output and turn it into acceptance checks.

Both tools print the same table (rccl-tests is a fork of nccl-tests)::

    #       size         count      type   redop    root     time   algbw   busbw #wrong     time ...
     8589934592    2147483648     float     sum      -1    47617  180.40  315.69      0    47584 ...

per message size: an out-of-place and an in-place group of (time us, algbw GB/s, busbw GB/s,
#wrong). Older versions have no ``root`` column and print ``error`` (the largest numerical
error, with ``*`` when above tolerance) instead of the ``#wrong`` count; ``alltoall`` prints
``N/A`` for the in-place ``#wrong``. Lines may carry an ``mpirun --tag-output`` prefix
(``[1,0]<stdout>:``). Standard library only, so that the kit's tests import it directly.
"""

from __future__ import annotations

import re

_TAG = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:")
_RANK = re.compile(r"^#\s*Rank\s+(\d+)\b.*?\bon\s+(\S+)\s+device\s+(\d+)\s+\[([^\]]*)\]\s*(.*)$")
_NUM = re.compile(r"^-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?$")


def _number(token):
    token = token.rstrip("*")
    if _NUM.match(token):
        value = float(token)
        return (
            int(value)
            if value.is_integer() and "." not in token and "e" not in token.lower()
            else value
        )
    return None


def parse_nccl_tests(text, op=None):
    """Parse one run's output into a dict (rows, peak and average busbw, #wrong total).

    ``op`` names the collective when the output does not (older versions print no
    "Collective test starting" line); a ``_perf`` suffix is dropped.
    """
    lines = [_TAG.sub("", line).rstrip() for line in (text or "").splitlines()]
    result = {
        "op": None,
        "ranks": [],
        "nranks": 0,
        "hosts": [],
        "devices": [],
        "rows": [],
        "columns": [],
        "wrong_metric": None,
        "avg_busbw": None,
        "out_of_bounds": None,
        "peak_busbw": None,
        "peak_busbw_size": None,
        "max_size": None,
        "wrong_total": 0,
        "version": None,
    }
    columns = None
    for line in lines:
        stripped = line.strip()
        match = re.search(r"Collective test starting:\s*(\w+)", stripped)
        if match:
            result["op"] = match.group(1)
            continue
        match = re.match(
            r"(?:#\s*)?(rccl-tests|nccl-tests)(?::\s*Version|\s+version)\s+(\S+)", stripped
        )
        if match:
            result["version"] = f"{match.group(1)} {match.group(2)}"
            continue
        match = _RANK.match(stripped)
        if match:
            rank, host, _dev, bus, name = match.groups()
            result["ranks"].append(
                {"rank": int(rank), "host": host, "bus_id": bus, "device": name.strip()}
            )
            continue
        if stripped.startswith("#") and " size " in f" {stripped[1:]} " and "busbw" in stripped:
            columns = stripped.lstrip("#").split()
            continue
        match = re.match(r"#\s*Avg bus bandwidth\s*:\s*([\d.eE+-]+)", stripped)
        if match:
            result["avg_busbw"] = float(match.group(1))
            continue
        match = re.match(r"#\s*Out of bounds values\s*:\s*(\d+)", stripped)
        if match:
            result["out_of_bounds"] = int(match.group(1))
            continue
        if columns and stripped and not stripped.startswith("#"):
            row = _row(stripped.split(), columns)
            if row is not None:
                result["rows"].append(row)
    if columns:
        result["columns"] = columns
        result["wrong_metric"] = "#wrong" if "#wrong" in columns else "error"
    result["nranks"] = len(result["ranks"])
    result["hosts"] = sorted({r["host"] for r in result["ranks"]})
    result["devices"] = sorted({r["device"] for r in result["ranks"] if r["device"]})
    name = result["op"] or op
    result["op"] = re.sub(r"_perf(_mpi)?$", "", name) if name else None
    best = None
    for row in result["rows"]:
        for placement in ("out_of_place", "in_place"):
            cell = row[placement]
            if cell["busbw"] is not None and (best is None or cell["busbw"] > best[0]):
                best = (cell["busbw"], row["size"])
            if isinstance(cell["wrong"], int):
                result["wrong_total"] += cell["wrong"]
    if best:
        result["peak_busbw"], result["peak_busbw_size"] = best
    if result["rows"]:
        result["max_size"] = max(row["size"] for row in result["rows"])
    return result


def _row(tokens, columns):
    """One data line -> dict, or None when it is not a data line."""
    lead = columns.index("time")  # size count type redop [root]
    if len(tokens) != len(columns) or _number(tokens[0]) is None:
        return None
    row = {
        "size": _number(tokens[0]),
        "count": _number(tokens[1]),
        "type": tokens[2],
        "redop": tokens[3],
        "root": _number(tokens[4]) if lead == 5 else None,
    }
    for placement, start in (("out_of_place", lead), ("in_place", lead + 4)):
        time_us, algbw, busbw, wrong = tokens[start : start + 4]
        if columns[start + 3] == "#wrong":
            wrong_value = None if wrong == "N/A" else _number(wrong)
        else:  # older "error" column: a float, starred when above tolerance
            wrong_value = 1 if wrong.endswith("*") else 0
        row[placement] = {
            "time_us": _number(time_us),
            "algbw": _number(algbw),
            "busbw": _number(busbw),
            "wrong": wrong_value,
        }
    return row


def collective_checks(parsed, reference=None, fraction=0.95, scope="intra_node", platform=""):
    """The checks one parsed run yields: peak busbw against the reference, and #wrong = 0.

    ``reference`` is the platform's busbw in GB/s for this collective and scope (None or 0:
    the busbw check is skipped, naming what is missing).
    """
    op = parsed.get("op") or "collective"
    suffix = "intra" if scope == "intra_node" else "inter"
    measured = parsed.get("peak_busbw")
    checks = []
    if not parsed.get("rows"):
        return [
            {
                "check": f"{op}_{suffix}_busbw",
                "op": "ge",
                "measured": None,
                "threshold": None,
                "unit": "GB/s",
                "skip": "",
                "detail": "no result table in the output",
            }
        ]
    ref = float(reference or 0)
    checks.append(
        {
            "check": f"{op}_{suffix}_busbw",
            "op": "ge",
            "unit": "GB/s",
            "measured": measured,
            "threshold": round(ref * float(fraction), 2) if ref else None,
            "skip": ""
            if ref
            else f"no busbw reference for {platform or 'this platform'} {scope} {op}",
            "detail": f"{float(fraction):.0%} of the {ref:g} GB/s reference, peak at "
            f"{parsed.get('peak_busbw_size')} B over {parsed.get('nranks')} ranks",
        }
    )
    checks.append(
        {
            "check": f"{op}_{suffix}_wrong",
            "op": "eq",
            "unit": "",
            "measured": parsed.get("wrong_total", 0) + (parsed.get("out_of_bounds") or 0),
            "threshold": 0,
            "skip": "",
            "detail": "wrong results (#wrong, plus out-of-bounds values)",
        }
    )
    return checks


def loop_checks(results, references=None, fraction=0.95, scope="intra_node", platform=""):
    """Checks for every item of a registered loop of runs (``item`` = the collective)."""
    references = references or {}
    checks = []
    for run in results or []:
        if run.get("skipped"):
            continue
        op = run.get("item")
        if run.get("rc", 0) != 0 or run.get("failed"):
            tail = (run.get("stderr") or run.get("msg") or "").strip().splitlines()[-1:]
            checks.append(
                {
                    "check": f"{op}_{'intra' if scope == 'intra_node' else 'inter'}_run",
                    "op": "eq",
                    "measured": run.get("rc"),
                    "threshold": 0,
                    "unit": "",
                    "skip": "",
                    "detail": tail[0] if tail else "the run failed",
                }
            )
            continue
        parsed = parse_nccl_tests(run.get("stdout", ""), op)
        checks.extend(collective_checks(parsed, references.get(op), fraction, scope, platform))
    return checks


def loop_runs(results, scope="intra_node"):
    """The raw outputs of a registered loop of runs, for the kit's result files:
    ``[{op, scope, rc, stdout}]`` (skipped items left out)."""
    runs = []
    for run in results or []:
        if run.get("skipped"):
            continue
        runs.append(
            {
                "op": run.get("item"),
                "scope": scope,
                "rc": run.get("rc"),
                "stdout": run.get("stdout", ""),
            }
        )
    return runs


class FilterModule:
    def filters(self):
        return {
            "pocforge_nccl_tests": parse_nccl_tests,
            "pocforge_collective_checks": collective_checks,
            "pocforge_collective_loop_checks": loop_checks,
            "pocforge_collective_runs": loop_runs,
        }
