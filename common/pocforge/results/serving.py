"""Serving results of a run, whatever produced them, as :class:`ServingResult`.

A serving stage holds one folder per workload, ``serving/<workload>/``, with either the
serving benchmark's own output (``summary.json`` + ``requests-<point>.jsonl``, the schema of
:mod:`pocforge.bench.summary`) or an importer's ``result.json``. Both are read into the same
normalised shape here, so verdicts, comparisons and the dashboard have one input.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from pocforge.results.adapters import from_bench_summary
from pocforge.results.base import SchemaError
from pocforge.results.schema import load_document
from pocforge.results.stage_schema import ServingPoint, ServingResult

BENCH_SUMMARY = "summary.json"
RESULT = "result.json"


def interactivity(point: ServingPoint) -> float | None:
    """Tokens/s one user sees: 1000 / median TPOT (the same formula for every tool)."""
    tpot = point.metrics.get("tpot_ms", {}).get("median")
    return 1000.0 / tpot if tpot else None


def scalar(point: ServingPoint, name: str) -> float | None:
    return point.metrics.get(name, {}).get("value")


def throughput_per_gpu(point: ServingPoint, gpus: int | None) -> float | None:
    per_gpu = scalar(point, "output_throughput_per_gpu")
    if per_gpu is not None:
        return per_gpu
    total = scalar(point, "output_throughput")
    return total / gpus if total is not None and gpus else None


def load_workload(folder: Path) -> ServingResult:
    """The serving result in ``serving/<workload>/``; raises SchemaError."""
    folder = Path(folder)
    if (folder / RESULT).exists():
        return load_document(folder / RESULT, ServingResult)
    if (folder / BENCH_SUMMARY).exists():
        try:
            data = json.loads((folder / BENCH_SUMMARY).read_text(encoding="utf-8"))
        except ValueError as exc:
            raise SchemaError(f"{folder / BENCH_SUMMARY}: not valid JSON: {exc}") from None
        return from_bench_summary(data, folder.name, f"{folder.name}/{BENCH_SUMMARY}")
    raise SchemaError(f"{folder}: neither {RESULT} nor {BENCH_SUMMARY}")


def finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


MAX_RECORDS = 20_000  # a bootstrap on more requests than this changes little but the time
_CACHE: dict[tuple[str, int, int, int], tuple[list[Any], int]] = {}


def _count_lines(fh: Any, chunk: int = 1 << 24) -> int:
    total = 0
    while block := fh.read(chunk):
        total += block.count(b"\n")
    return total


def load_records(path: Path, limit: int = MAX_RECORDS) -> tuple[list[Any], int]:
    """(records, total lines): every record, or an evenly spaced sample of ``limit``.

    A run with a million requests still reports in seconds: lines are counted in blocks and
    the sample is read by seeking to evenly spaced offsets (it keeps every repeat's share
    and the time order). A trailing partial line (killed writer) is skipped. Results are
    cached per file (path, size, mtime) for the life of the process.
    """
    import mmap

    from pocforge.bench.records import RequestRecord

    path = Path(path)
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns, limit)
    if key in _CACHE:
        return _CACHE[key]
    with open(path, "rb") as fh:
        total = _count_lines(fh)
        if total <= limit or st.st_size == 0:
            fh.seek(0)
            lines = [ln for ln in fh.read().split(b"\n") if ln.strip()]
        else:
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                lines = []
                for i in range(limit):
                    start = int(i * st.st_size / limit)
                    if start:
                        start = mm.find(b"\n", start - 1) + 1
                    end = mm.find(b"\n", start)
                    if start <= 0 and i or end < 0:
                        continue
                    lines.append(mm[start:end])
    out = []
    for line in lines:
        try:
            out.append(RequestRecord.model_validate_json(line))
        except ValueError:
            continue
    _CACHE.clear()  # keep one file's records at a time: a big run must not pile up memory
    _CACHE[key] = (out, total)
    return out, total
