"""ROCm MAD performance CSVs (``perf.csv``, ``perf_<model>.csv``): one row per metric.

Columns read: ``model``, ``performance``, ``metric`` and, where present, ``tp``, ``inp``,
``out``, ``max_concurrency``, ``num_prompts``, ``status`` and ``unit``. Rows of the same
model and configuration form one sweep point; metric names like ``median_ttft`` or
``throughput_gen`` are mapped to ours and anything else is kept as a note. MAD's
``relative_change`` column (empty unless a baseline was configured) is not used: the
comparison is ours.
"""

from __future__ import annotations

import csv
import re
from collections import defaultdict
from pathlib import Path

from pocforge.results.importers.common import (
    Imported,
    ResultImportError,
    add_interactivity,
    sort_points,
)
from pocforge.results.stage_schema import DefinitionDifference, ServingPoint, ServingResult

TOOL = "mad"
SCALARS = {
    "throughput_gen": "output_throughput",
    "throughput_tot": "total_token_throughput",
    "throughput_req": "request_throughput",
    "request_throughput": "request_throughput",
    "output_throughput": "output_throughput",
}
_DIST = re.compile(r"^(mean|median|p\d+|std)_(ttft|tpot|itl|e2el)$")
DEFINITIONS = {
    "throughput_gen": "Output tokens / duration, from vLLM's benchmark_serving run inside MAD.",
    "throughput_tot": "(Input + output tokens) / duration.",
    "median_ttft": "Median TTFT of vLLM's benchmark_serving (ms).",
}
DIFFERENCES = [
    DefinitionDifference(
        metric="*",
        theirs="one number per metric (MAD keeps the summary, not the distribution)",
        ours="full distributions and per-request records",
        effect="no intervals: verdicts on MAD numbers are point verdicts",
    ),
]
KEY = ("model", "tp", "inp", "out", "max_concurrency", "num_prompts", "kv_cache_dtype", "bs")


def _num(text: str | None) -> float | None:
    try:
        return float(text) if text not in (None, "") else None
    except ValueError:
        return None


def parse(paths: list[Path], workload: str, gpus: int | None = None) -> Imported:
    groups: dict[tuple, list[dict[str, str]]] = defaultdict(list)
    for path in paths:
        try:
            with open(path, newline="", encoding="utf-8") as fh:
                rows = list(csv.DictReader(fh))
        except OSError as exc:
            raise ResultImportError(f"{path}: cannot read: {exc.strerror or exc}") from None
        if not rows or "performance" not in rows[0] or "metric" not in rows[0]:
            raise ResultImportError(
                f"{path}: not a MAD perf CSV (needs 'performance' and 'metric' columns)"
            )
        for row in rows:
            groups[tuple(row.get(k, "") for k in KEY)].append(row)
    combos = {(k[0], k[2], k[3]) for k in groups}
    results: dict[str, ServingResult] = {}
    for key, rows in groups.items():
        model, tp, inp, out, conc, nprompts = key[:6]
        name = workload if len(combos) == 1 else f"{workload}_{inp or 'x'}x{out or 'x'}"
        c = _num(conc)
        pid, mode, value = (
            (f"c{int(c)}", "concurrency", c) if c else (model or "point", "unknown", None)
        )
        metrics: dict[str, dict[str, float | None]] = {}
        notes, failed = [], False
        for row in rows:
            metric, perf = row["metric"].strip(), _num(row["performance"])
            if (row.get("status") or "").upper().startswith("FAIL"):
                failed = True
            if perf is None:
                continue
            if metric in SCALARS:
                metrics[SCALARS[metric]] = {"value": perf}
            elif m := _DIST.match(metric):
                stat = {"mean": "mean", "median": "median", "std": "std"}.get(
                    m.group(1), m.group(1)
                )
                metrics.setdefault(f"{m.group(2)}_ms", {})[stat] = perf
            else:
                notes.append(f"{pid}: {metric} = {perf:g} {row.get('unit', '')}".strip())
        n_gpus = gpus or (int(tp) if tp.isdigit() else None)
        if n_gpus and "output_throughput" in metrics:
            metrics["output_throughput_per_gpu"] = {
                "value": metrics["output_throughput"]["value"] / n_gpus
            }
        add_interactivity(metrics)
        point = ServingPoint(
            id=pid,
            mode=mode,
            value=value,
            status="failed" if failed else "ok",
            requests=int(_num(nprompts)) if _num(nprompts) else None,
            metrics=metrics,
        )
        res = results.setdefault(
            name,
            ServingResult(
                workload=name,
                tool=TOOL,
                source_file=", ".join(p.name for p in paths),
                model=model,
                gpus=n_gpus,
                definitions=DEFINITIONS,
                differences=DIFFERENCES,
            ),
        )
        res.points.append(point)
        res.notes.extend(notes)
    for res in results.values():
        res.points = sort_points(res.points)
    return Imported(tool=TOOL, serving=list(results.values()))
