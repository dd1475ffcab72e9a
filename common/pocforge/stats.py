"""Statistics, one home for the whole kit: percentiles, t and Welch intervals, bootstrap,
and the threshold decision with its margin.

Used by the serving benchmark (SLO verdicts per point), the results comparison (run vs
run) and the acceptance verdicts, so the three can never disagree on what "p99" or
"pass" means.

- Percentiles use numpy's default linear interpolation, as vLLM's benchmark does, so the
  same samples give the same p99 in both tools; ``std`` is the population standard
  deviation (numpy's default, also vLLM's).
- Intervals are two-sided 95%.
- A decision compares an interval ``[lo, hi]`` with ``metric <op> threshold``: ``pass``
  when the whole interval is on the good side, ``fail`` when it is wholly on the bad side,
  else ``inconclusive``. The margin is the headroom: ``threshold - estimate`` for ``<``/``<=``
  and ``estimate - threshold`` for ``>``/``>=``, positive when the criterion is met.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Literal

import numpy as np

from pocforge.metrics import STATISTICS

Decision = Literal["pass", "fail", "inconclusive"]
Op = Literal["<", "<=", ">", ">="]

# Two-sided 95% Student-t critical values t_{0.975, df}, df = 1..30 (from the t table;
# kept as data because scipy is not a dependency of the kit). Above 30 the normal 1.96.
T975 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)


def t975(df: float) -> float:
    """Two-sided 95% Student-t critical value; a fractional df is rounded down (wider)."""
    k = max(1, int(math.floor(df)))
    return T975[k - 1] if k <= len(T975) else 1.96


# --------------------------------------------------------------------------- point statistics


def statistic(values: np.ndarray, name: str) -> float:
    """One statistic of :data:`pocforge.metrics.STATISTICS` on a non-empty 1-D array."""
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


def statistic_rows(draws: np.ndarray, name: str) -> np.ndarray:
    """:func:`statistic` of each row of a (resamples, n) matrix, vectorised."""
    if name == "mean":
        return draws.mean(axis=1)
    if name == "std":
        return draws.std(axis=1)
    if name == "min":
        return draws.min(axis=1)
    if name == "max":
        return draws.max(axis=1)
    if name == "median":
        return np.median(draws, axis=1)
    if name.startswith("p"):
        return np.percentile(draws, float(name[1:]), axis=1)
    raise ValueError(f"unknown statistic {name!r}")


def harmonic_mean(values: Iterable[float]) -> float:
    """n / sum(1 / v) of positive rates: the rate of the whole when each value is the rate of
    an equal amount of work (tokens per second of equal-sized steps), i.e. total work / total
    time. The arithmetic mean of such rates over-weights the fast steps."""
    arr = np.asarray(list(values), dtype=float)
    if not arr.size or np.any(arr <= 0):
        raise ValueError("harmonic mean needs at least one value, all positive")
    return float(arr.size / np.sum(1.0 / arr))


def describe(values: Iterable[float]) -> dict[str, float | None]:
    """Every statistic of STATISTICS plus the count ``n``; None everywhere when empty."""
    arr = np.asarray(list(values), dtype=float)
    out: dict[str, float | None] = {"n": float(arr.size)}
    for name in STATISTICS:
        out[name] = statistic(arr, name) if arr.size else None
    return out


def samples_needed(name: str) -> int:
    """Fewest samples for which statistic ``name`` means something: 1/(1-q) for pq."""
    if name.startswith("p") and name != "p50":
        q = float(name[1:]) / 100.0
        return int(np.ceil(round(1.0 / (1.0 - q), 6)))
    return 2


# --------------------------------------------------------------------------- intervals


def t_interval(values: Sequence[float]) -> tuple[float, float, float] | None:
    """Mean and two-sided 95% Student-t interval; None for fewer than two values."""
    arr = np.asarray(values, dtype=float)
    if arr.size < 2:
        return None
    mean = float(arr.mean())
    sem = float(arr.std(ddof=1)) / np.sqrt(arr.size)
    t = t975(arr.size - 1)
    return mean, mean - t * sem, mean + t * sem


def welch_interval(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, float] | None:
    """(mean(b) - mean(a), low, high): Welch's 95% interval with Welch-Satterthwaite
    degrees of freedom; None with fewer than two values a side."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.size < 2 or y.size < 2:
        return None
    va, vb = x.var(ddof=1) / x.size, y.var(ddof=1) / y.size
    diff = float(y.mean() - x.mean())
    se = math.sqrt(va + vb)
    if se == 0:
        return diff, diff, diff
    df = (va + vb) ** 2 / (va**2 / (x.size - 1) + vb**2 / (y.size - 1))
    half = t975(df) * se
    return diff, diff - half, diff + half


def bootstrap_interval(
    groups: Sequence[np.ndarray], name: str, resamples: int, rng: np.random.Generator
) -> tuple[float, float]:
    """95% percentile-bootstrap interval of statistic ``name`` over pooled ``groups``.

    One group: resample its elements. Several groups (repeats of a point): resample the
    groups, then the elements of each drawn group, so run-to-run variation widens it.
    """
    groups = [g for g in groups if g.size]
    est = np.empty(resamples)
    for b in range(resamples):
        if len(groups) == 1:
            g = groups[0]
            draw = g[rng.integers(0, g.size, g.size)]
        else:
            picks = rng.integers(0, len(groups), len(groups))
            draw = np.concatenate(
                [groups[i][rng.integers(0, groups[i].size, groups[i].size)] for i in picks]
            )
        est[b] = statistic(draw, name)
    lo, hi = np.percentile(est, [2.5, 97.5])
    return float(lo), float(hi)


def bootstrap_difference(
    a: np.ndarray,
    b: np.ndarray,
    name: str,
    *,
    resamples: int = 1000,
    seed: int = 0,
    max_samples: int = 20000,
    chunk: int = 100,
) -> tuple[float, float, float]:
    """(stat(b) - stat(a), low, high): 95% percentile bootstrap, sides resampled
    independently, each side capped at ``max_samples`` (an even random subset)."""
    rng = np.random.default_rng(seed)
    if a.size > max_samples:
        a = rng.choice(a, max_samples, replace=False)
    if b.size > max_samples:
        b = rng.choice(b, max_samples, replace=False)
    est = statistic(b, name) - statistic(a, name)
    diffs = []
    for start in range(0, resamples, chunk):
        k = min(chunk, resamples - start)
        db = statistic_rows(b[rng.integers(0, b.size, (k, b.size))], name)
        da = statistic_rows(a[rng.integers(0, a.size, (k, a.size))], name)
        diffs.append(db - da)
    lo, hi = np.percentile(np.concatenate(diffs), [2.5, 97.5])
    return float(est), float(lo), float(hi)


# --------------------------------------------------------------------------- decisions


def op_for(better: Literal["lower", "higher"]) -> Op:
    """The criterion a threshold on a metric means: at most it when lower is better."""
    return "<=" if better == "lower" else ">="


def decide(op: str, threshold: float, lo: float, hi: float) -> Decision:
    """Interval [lo, hi] against ``metric <op> threshold`` (a point: lo == hi)."""
    if op in ("<", "<="):
        good = hi < threshold if op == "<" else hi <= threshold
        bad = lo >= threshold if op == "<" else lo > threshold
    elif op in (">", ">="):
        good = lo > threshold if op == ">" else lo >= threshold
        bad = hi <= threshold if op == ">" else hi < threshold
    else:
        raise ValueError(f"unknown comparison {op!r}; use <, <=, > or >=")
    return "pass" if good else "fail" if bad else "inconclusive"


def margin(op: str, threshold: float, estimate: float | None) -> tuple[float | None, float | None]:
    """(headroom, headroom in % of the threshold); positive when the criterion is met."""
    if estimate is None:
        return None, None
    m = threshold - estimate if op in ("<", "<=") else estimate - threshold
    return m, (100.0 * m / abs(threshold) if threshold else None)
