"""rccl-tests / nccl-tests output -> the collectives role's acceptance checks.

The output is read by the kit's one nccl-tests reader
(:mod:`pocforge.results.importers.nccl_table`, also behind ``pocforge import``): every
table layout, launcher prefixes, several runs in one output. Ansible runs this filter in
its controller process, the kit's own Python, where the kit is importable.
"""

from __future__ import annotations

from pocforge.results.importers.nccl_table import TableRun, collective_name, read_runs


def parse_nccl_tests(text, op=None):
    """One run's output as a dict (rows, peak and average busbw, #wrong total); of several
    runs, the last.

    ``op`` names the collective when the output does not (older versions print no
    "Collective test starting" line); a ``_perf`` / ``_perf_mpi`` suffix is dropped.
    """
    runs = read_runs(text)
    run = runs[-1] if runs else TableRun()
    name = run.collective or (collective_name(op) if op else None)
    result = {
        "op": name,
        "ranks": run.ranks,
        "nranks": len(run.ranks),
        "hosts": sorted({r["host"] for r in run.ranks}),
        "devices": sorted({r["device"] for r in run.ranks if r["device"]}),
        "rows": run.rows,
        "columns": run.columns,
        "wrong_metric": ("#wrong" if run.counts_wrong else "error") if run.columns else None,
        "avg_busbw": run.avg_busbw,
        "out_of_bounds": run.out_of_bounds,
        "peak_busbw": None,
        "peak_busbw_size": None,
        "max_size": max((row["size"] for row in run.rows), default=None),
        "wrong_total": 0,
        "version": run.version,
    }
    best = None
    for row in run.rows:
        for placement in ("out_of_place", "in_place"):
            cell = row[placement]
            if cell["busbw"] is not None and (best is None or cell["busbw"] > best[0]):
                best = (cell["busbw"], row["size"])
            if isinstance(cell["wrong"], int):
                result["wrong_total"] += cell["wrong"]
    if best:
        result["peak_busbw"], result["peak_busbw_size"] = best
    return result


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
