"""Statistics of one run (a point's repeat) and across repeats.

Percentiles use numpy's default linear interpolation, as vLLM's benchmark does, so the
same samples give the same p99 in both tools. ``std`` is the population standard
deviation (numpy's default, also vLLM's).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from pocforge.bench.records import RequestRecord
from pocforge.metrics import STATISTICS

# Two-sided 95% Student-t critical values t_{0.975, df}, df = 1..30 (from the t table;
# kept as data because scipy is not a dependency). Above 30 the normal 1.96 is used.
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip

DISTRIBUTION_METRICS = ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms", "interactivity")
SCALAR_METRICS = (
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    "goodput",
    "output_throughput_per_gpu",
    "error_rate",
)


def statistic(values: np.ndarray, name: str) -> float:
    """One statistic of STATISTICS on a non-empty 1-D array."""
    if name == "mean":
        return float(np.mean(values))
    if name == "std":
        return float(np.std(values))
    if name == "min":
        return float(np.min(values))
    if name == "max":
        return float(np.max(values))
    if name == "median":
        return float(np.median(values))
    if name.startswith("p"):
        return float(np.percentile(values, float(name[1:])))
    raise ValueError(f"unknown statistic {name!r}")


def describe(values: Iterable[float]) -> dict[str, float | None]:
    """Every statistic of STATISTICS plus the count ``n``; None everywhere when empty."""
    arr = np.asarray(list(values), dtype=float)
    out: dict[str, float | None] = {"n": float(arr.size)}
    for name in STATISTICS:
        out[name] = statistic(arr, name) if arr.size else None
    return out


def t_interval(values: Sequence[float]) -> tuple[float, float, float] | None:
    """Mean and two-sided 95% Student-t interval; None for fewer than two values."""
    arr = np.asarray(values, dtype=float)
    if arr.size < 2:
        return None
    mean = float(arr.mean())
    sem = float(arr.std(ddof=1)) / np.sqrt(arr.size)
    df = arr.size - 1
    t = _T975[df - 1] if df <= len(_T975) else 1.96
    return mean, mean - t * sem, mean + t * sem


def samples(records: Sequence[RequestRecord], metric: str) -> np.ndarray:
    """Per-request samples of a distribution metric over the successful records.

    ``itl_ms`` pools every gap of every request; ``tpot_ms`` and ``interactivity`` skip
    requests with fewer than two output tokens (their TPOT is undefined).
    """
    ok = [r for r in records if r.success]
    if metric == "ttft_ms":
        vals = [r.ttft_ms for r in ok]
    elif metric == "e2el_ms":
        vals = [r.e2el_ms for r in ok]
    elif metric == "tpot_ms":
        vals = [r.tpot_ms for r in ok if r.tpot_ms is not None]
    elif metric == "interactivity":
        vals = [1000.0 / r.tpot_ms for r in ok if r.tpot_ms]
    elif metric == "itl_ms":
        vals = [x for r in ok for x in r.itl_ms]
    else:
        raise ValueError(f"{metric!r} is not a per-request metric")
    return np.asarray(vals, dtype=float)


def meets_slos(record: RequestRecord, thresholds: dict[str, float]) -> bool:
    """vLLM's goodput rule: a request is good if its TTFT, TPOT and E2EL are each within
    the SLO thresholds given for them (a request with one output token has TPOT 0)."""
    if not record.success:
        return False
    values = {
        "ttft_ms": record.ttft_ms,
        "tpot_ms": record.tpot_ms or 0.0,
        "e2el_ms": record.e2el_ms,
    }
    return all(values[m] <= thr for m, thr in thresholds.items() if m in values)


def peak_concurrency(records: Sequence[RequestRecord]) -> int:
    """Most requests in flight at once, from send and end times (failed ones included)."""
    events: list[tuple[float, int]] = []
    for r in records:
        end = r.sent_s + (r.e2el_ms or 0.0) / 1000.0
        events += [(r.sent_s, 1), (end, -1)]
    events.sort(key=lambda e: (e[0], e[1]))  # an end before a start at the same instant
    cur = peak = 0
    for _, step in events:
        cur += step
        peak = max(peak, cur)
    return peak


def run_metrics(
    records: Sequence[RequestRecord],
    duration_s: float,
    goodput_thresholds: dict[str, float],
    gpus: int,
) -> dict[str, dict[str, float | None] | float | None]:
    """All serving metrics of one run: distributions described, scalars as numbers."""
    ok = [r for r in records if r.success]
    out: dict[str, dict[str, float | None] | float | None] = {}
    for m in DISTRIBUTION_METRICS:
        out[m] = describe(samples(records, m))
    dur = duration_s if duration_s > 0 else float("nan")
    out_tok = sum(r.output_tokens or 0 for r in ok)
    in_tok = sum(r.prompt_tokens or 0 for r in ok)
    out["request_throughput"] = len(ok) / dur
    out["output_throughput"] = out_tok / dur
    out["total_token_throughput"] = (in_tok + out_tok) / dur
    out["goodput"] = (
        sum(meets_slos(r, goodput_thresholds) for r in ok) / dur if goodput_thresholds else None
    )
    out["output_throughput_per_gpu"] = out_tok / dur / gpus if gpus else None
    out["error_rate"] = (len(records) - len(ok)) / len(records) if records else None
    return out
