"""Comparisons: run vs run (regressions) and ours vs a competitor on the same workload.

Run vs run, per workload, sweep point and metric, ``delta = candidate - baseline`` with a
95% interval:

- both sides have per-request records: percentile bootstrap of the difference of the
  statistic, each side resampled independently (up to ``max_samples`` per side);
- both sides have >= 2 repeats of a scalar metric: Welch's t interval, with
  Welch-Satterthwaite degrees of freedom (both from :mod:`pocforge.stats`);
- otherwise no interval (``method="point"``) and a ±5% band stands in for noise.

``same`` when the interval holds 0 (or the change is inside the band), ``better`` or
``worse`` by the metric's better direction from :mod:`pocforge.metrics`.

Ours vs a competitor: both sweeps are reduced to their Pareto front of
(interactivity = tokens/s per user, output tokens/s per GPU); throughput per GPU is
compared at equal interactivity (linear interpolation on each front, only inside both
fronts' ranges) and at each side's best point, and per dollar (tokens per dollar) and per
watt when price or power are given.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

from pocforge.metrics import metric as registry_metric
from pocforge.results.serving import interactivity, load_records, throughput_per_gpu
from pocforge.stats import bootstrap_difference, welch_interval

NOISE_BAND = 0.05
DEFAULT_METRICS: tuple[tuple[str, str], ...] = (
    ("output_throughput", "value"),
    ("request_throughput", "value"),
    ("ttft_ms", "p50"),
    ("ttft_ms", "p99"),
    ("tpot_ms", "p50"),
    ("tpot_ms", "p99"),
    ("itl_ms", "p99"),
    ("e2el_ms", "p99"),
)
Change = Literal["better", "worse", "same"]


class MetricDelta(BaseModel):
    workload: str
    point: str
    metric: str
    statistic: str
    baseline: float
    candidate: float
    delta: float
    delta_pct: float | None
    ci_low: float | None
    ci_high: float | None
    method: Literal["bootstrap", "welch", "point"]
    change: Change
    better: Literal["lower", "higher"]


def classify(delta: float, lo: float | None, hi: float | None, better: str, base: float) -> Change:
    if lo is None or hi is None:
        if base and abs(delta) / abs(base) <= NOISE_BAND:
            return "same"
        improved = delta < 0 if better == "lower" else delta > 0
        return "better" if improved else "worse"
    if lo <= 0 <= hi:
        return "same"
    improved = hi < 0 if better == "lower" else lo > 0
    return "better" if improved else "worse"


def _samples(folder, point, metric: str) -> np.ndarray | None:
    if folder is None or not point.records_file or not (folder / point.records_file).is_file():
        return None
    from pocforge.bench.run_metrics import DISTRIBUTION_METRICS, samples

    if metric not in DISTRIBUTION_METRICS:
        return None
    return samples(load_records(folder / point.records_file)[0], metric)


def compare_runs(
    baseline: object,
    candidate: object,
    metrics: Sequence[tuple[str, str]] = DEFAULT_METRICS,
    *,
    resamples: int = 1000,
) -> list[MetricDelta]:
    """Per-metric deltas of ``candidate`` against ``baseline`` (RunData of each)."""
    out = []
    for workload, (res_b, folder_b) in candidate.serving.items():  # type: ignore[attr-defined]
        if workload not in baseline.serving:  # type: ignore[attr-defined]
            continue
        res_a, folder_a = baseline.serving[workload]  # type: ignore[attr-defined]
        points_a = {p.id: p for p in res_a.points if p.status != "failed"}
        for pb in res_b.points:
            pa = points_a.get(pb.id)
            if pa is None or pb.status == "failed":
                continue
            for k, (name, stat) in enumerate(metrics):
                va = pa.metrics.get(name, {}).get(stat)
                vb = pb.metrics.get(name, {}).get(stat)
                if va is None or vb is None:
                    continue
                reg = registry_metric("serving", name)
                better = reg.better if reg else "lower"
                lo = hi = None
                method: Literal["bootstrap", "welch", "point"] = "point"
                delta = vb - va
                sa, sb = _samples(folder_a, pa, name), _samples(folder_b, pb, name)
                if sa is not None and sb is not None and sa.size and sb.size:
                    delta, lo, hi = bootstrap_difference(sa, sb, stat, resamples=resamples, seed=k)
                    method = "bootstrap"
                elif stat == "value":
                    w = welch_interval(pa.per_repeat.get(name, []), pb.per_repeat.get(name, []))
                    if w is not None:
                        delta, lo, hi = w
                        method = "welch"
                out.append(
                    MetricDelta(
                        workload=workload,
                        point=pb.id,
                        metric=name,
                        statistic=stat,
                        baseline=va,
                        candidate=vb,
                        delta=delta,
                        delta_pct=100.0 * delta / va if va else None,
                        ci_low=lo,
                        ci_high=hi,
                        method=method,
                        change=classify(delta, lo, hi, better, va),
                        better=better,
                    )
                )
    return out


# --------------------------------------------------------------------------- competitors


class Cost(BaseModel):
    gpus: int | None = None
    price_per_gpu_hour: float | None = None
    power_w_per_gpu: float | None = None


def pareto_front(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Non-dominated (x, y) pairs, both larger-is-better, sorted by x."""
    front: list[tuple[float, float]] = []
    for x, y in sorted(points, key=lambda p: (-p[0], -p[1])):
        if not front or y > front[-1][1]:
            front.append((x, y))
    return sorted(front)


def interpolate(front: Sequence[tuple[float, float]], x: float) -> float | None:
    """y on the front at x (linear between neighbours); None outside the front's x range."""
    if not front or x < front[0][0] or x > front[-1][0]:
        return None
    for (x0, y0), (x1, y1) in zip(front, front[1:], strict=False):
        if x0 <= x <= x1:
            return y0 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return front[0][1]


def curve(result: object, gpus: int | None) -> list[tuple[float, float]]:
    """(interactivity, output tokens/s per GPU) of every point of a ServingResult."""
    pts = []
    for p in result.points:  # type: ignore[attr-defined]
        x, y = interactivity(p), throughput_per_gpu(p, gpus)
        if p.status != "failed" and x is not None and y is not None:
            pts.append((x, y))
    return pts


class AtInteractivity(BaseModel):
    interactivity: float
    ours: float
    theirs: float
    ratio: float


class CompetitorComparison(BaseModel):
    name: str
    workload: str
    ours_best: float | None
    theirs_best: float | None
    ratio_best: float | None
    at_interactivity: list[AtInteractivity]
    ours_best_point: str | None = None
    ours_best_ci: tuple[float, float] | None = Field(
        None, description="95% interval of our best tok/s/GPU across repeats, where measured."
    )
    published: str | None = Field(
        None, description="Where their numbers were published (not measured here), if so."
    )
    ours_price: float | None = None
    theirs_price: float | None = None
    ours_tokens_per_dollar: float | None = None
    theirs_tokens_per_dollar: float | None = None
    ours_usd_per_million: float | None = None
    theirs_usd_per_million: float | None = None
    ratio_per_dollar: float | None = None
    ours_tokens_per_joule: float | None = None
    theirs_tokens_per_joule: float | None = None
    ratio_per_watt: float | None = None
    notes: list[str] = []


def compare_competitor(
    name: str,
    ours: object,
    theirs: object,
    ours_cost: Cost,
    theirs_cost: Cost,
    min_interactivity: float | None = None,
) -> CompetitorComparison:
    """Ours vs theirs per GPU, at equal interactivity, per dollar and per watt.

    ``min_interactivity`` (from a TPOT SLO) restricts "best" to points inside the SLO.
    """
    notes = []
    a = curve(ours, ours_cost.gpus or ours.gpus)  # type: ignore[attr-defined]
    b = curve(theirs, theirs_cost.gpus or theirs.gpus)  # type: ignore[attr-defined]
    if min_interactivity is not None:
        notes.append(
            f"best points restricted to interactivity >= {min_interactivity:.3g} tok/s/user (SLO)"
        )
    fa, fb = pareto_front(a), pareto_front(b)

    def best(front: list[tuple[float, float]]) -> float | None:
        ys = [y for x, y in front if min_interactivity is None or x >= min_interactivity]
        return max(ys) if ys else None

    ob, tb = best(fa), best(fb)
    if tb is None:
        # Points without latency figures (an offline maximum-throughput run, a published
        # table): their throughput counts as "best", never at equal interactivity.
        loose = _without_latency(theirs, theirs_cost.gpus or theirs.gpus)  # type: ignore[attr-defined]
        if loose:
            tb = max(loose)
            notes.append(
                "their best is a point without latency figures (an offline or maximum-"
                "throughput number): it meets no SLO by construction, so read the ratio as an "
                "upper bound for them"
            )
    levels = sorted({x for x, _ in fa} | {x for x, _ in fb})
    at = []
    for x in levels:
        ya, yb = interpolate(fa, x), interpolate(fb, x)
        if ya is not None and yb is not None and yb > 0:
            at.append(AtInteractivity(interactivity=x, ours=ya, theirs=yb, ratio=ya / yb))
    if not at:
        notes.append("the two curves do not overlap in interactivity: no like-for-like point")
    out = CompetitorComparison(
        name=name,
        workload=ours.workload,
        ours_best=ob,
        theirs_best=tb,  # type: ignore[attr-defined]
        ratio_best=ob / tb if ob is not None and tb else None,
        at_interactivity=at,
        notes=notes,
    )
    best_point = _best_point(ours, ours_cost.gpus or ours.gpus, ob)  # type: ignore[attr-defined]
    if best_point is not None:
        out.ours_best_point = best_point.id
        out.ours_best_ci = _per_gpu_interval(best_point, ours_cost.gpus or ours.gpus)  # type: ignore[attr-defined]
    out.ours_price, out.theirs_price = ours_cost.price_per_gpu_hour, theirs_cost.price_per_gpu_hour
    if ob is not None and tb is not None:
        if ours_cost.price_per_gpu_hour and theirs_cost.price_per_gpu_hour:
            out.ours_tokens_per_dollar = ob * 3600.0 / ours_cost.price_per_gpu_hour
            out.theirs_tokens_per_dollar = tb * 3600.0 / theirs_cost.price_per_gpu_hour
            out.ours_usd_per_million = 1e6 / out.ours_tokens_per_dollar
            out.theirs_usd_per_million = 1e6 / out.theirs_tokens_per_dollar
            out.ratio_per_dollar = out.ours_tokens_per_dollar / out.theirs_tokens_per_dollar
        if ours_cost.power_w_per_gpu and theirs_cost.power_w_per_gpu:
            out.ours_tokens_per_joule = ob / ours_cost.power_w_per_gpu
            out.theirs_tokens_per_joule = tb / theirs_cost.power_w_per_gpu
            out.ratio_per_watt = out.ours_tokens_per_joule / out.theirs_tokens_per_joule
    return out


def _without_latency(result: object, gpus: int | None) -> list[float]:
    return [
        y
        for p in result.points  # type: ignore[attr-defined]
        if p.status != "failed"
        and interactivity(p) is None
        and (y := throughput_per_gpu(p, gpus)) is not None
    ]


def _best_point(result: object, gpus: int | None, best: float | None):
    """The sweep point whose tok/s/GPU is ``best``."""
    if best is None:
        return None
    for p in result.points:  # type: ignore[attr-defined]
        y = throughput_per_gpu(p, gpus)
        if y is not None and abs(y - best) <= 1e-9 * max(1.0, abs(best)):
            return p
    return None


def _per_gpu_interval(point, gpus: int | None) -> tuple[float, float] | None:
    """The point's 95% interval of output tok/s/GPU across repeats, where it has one."""
    per_gpu = point.ci.get("output_throughput_per_gpu", {}).get("value")
    if per_gpu is not None:
        return per_gpu
    total = point.ci.get("output_throughput", {}).get("value")
    if total is not None and gpus:
        return (total[0] / gpus, total[1] / gpus)
    return None
