"""A point across its repeats: means with Student-t intervals, and the SLO verdicts."""

from __future__ import annotations

import math

import numpy as np

from pocforge.bench.config import SweepConfig
from pocforge.bench.records import RequestRecord
from pocforge.bench.run_metrics import (
    DISTRIBUTION_METRICS,
    SCALAR_METRICS,
    samples,
)
from pocforge.bench.summary import (
    Aggregate,
    RepeatResult,
)
from pocforge.bench.verdicts import judge
from pocforge.metrics import STATISTICS
from pocforge.stats import t_interval


def aggregate(repeats: list[RepeatResult]) -> dict[str, dict[str, Aggregate]]:
    ok = [r for r in repeats if r.status == "ok"]
    out: dict[str, dict[str, Aggregate]] = {}

    def agg(vals: list[float]) -> Aggregate | None:
        vals = [v for v in vals if v is not None and math.isfinite(v)]
        if not vals:
            return None
        ci = t_interval(vals)
        lo, hi = (ci[1], ci[2]) if ci else (None, None)
        return Aggregate(
            mean=float(np.mean(vals)), ci95_low=lo, ci95_high=hi, n=len(vals), values=vals
        )

    for m in DISTRIBUTION_METRICS:
        stats = {}
        for s in STATISTICS:
            a = agg([r.metrics[m][s] for r in ok if isinstance(r.metrics.get(m), dict)])
            if a is not None:
                stats[s] = a
        if stats:
            out[m] = stats
    # a sweep's caller may add scalar metrics of its own to the repeats (energy figures)
    added = sorted(
        {k for r in ok for k, v in r.metrics.items() if not isinstance(v, dict)}
        - set(SCALAR_METRICS)
        - set(DISTRIBUTION_METRICS)
    )
    for m in (*SCALAR_METRICS, *added):
        a = agg([r.metrics.get(m) for r in ok])
        if a is not None:
            out[m] = {"value": a}
    return out


def verdicts(cfg: SweepConfig, per_repeat: list[list[RequestRecord]], repeats: list[RepeatResult]):
    ok_idx = [i for i, r in enumerate(repeats) if r.status == "ok"]
    out = []
    for k, slo in enumerate(cfg.slos):
        if slo.metric in DISTRIBUTION_METRICS:
            groups = [samples(per_repeat[i], slo.metric) for i in ok_idx]
            out.append(
                judge(
                    slo,
                    per_repeat_samples=groups,
                    resamples=cfg.bootstrap_resamples,
                    seed=cfg.seed + k,
                )
            )
        else:
            vals = [repeats[i].metrics.get(slo.metric) for i in ok_idx]
            out.append(judge(slo, per_repeat_values=vals, seed=cfg.seed + k))
    return out
