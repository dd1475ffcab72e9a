"""A point across its repeats: means with Student-t intervals, and the SLO verdicts; a
point judged (:func:`judge_point`) as the sweep judges it, and a finished sweep judged
again (:func:`rejudge`) once figures measured after it are in its repeats (a cluster run's
energy, from the nodes' telemetry collected at the end)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from pocforge.bench.config import SweepConfig
from pocforge.bench.environment import definitions
from pocforge.bench.measured import Measured, read_measured
from pocforge.bench.run_metrics import (
    DISTRIBUTION_METRICS,
    SCALAR_METRICS,
    samples,
)
from pocforge.bench.summary import (
    Aggregate,
    PointSummary,
    RepeatResult,
    Summary,
    write_summary,
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


def verdicts(cfg: SweepConfig, per_repeat: list[list[Measured]], repeats: list[RepeatResult]):
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


def judge_point(
    summary: Summary, point: PointSummary, cfg: SweepConfig, per_repeat: list[list[Measured]]
) -> None:
    """Aggregate ``point``'s repeats and judge its SLOs (a failed point has no verdicts);
    metrics a hook added to the repeats are defined in the summary."""
    added = {k for r in point.repeats for k in r.metrics} - set(summary.definitions)
    summary.definitions.update(definitions(sorted(added)))
    point.aggregate = aggregate(point.repeats)
    point.verdicts = verdicts(cfg, per_repeat, point.repeats) if point.status != "failed" else []
    point.client_limited = any(r.client.limited for r in point.repeats)


def best_passing(summary: Summary) -> str | None:
    """The highest point whose every verdict passes."""
    passing = [
        p
        for p in summary.points
        if p.status == "ok" and p.verdicts and all(v.verdict == "pass" for v in p.verdicts)
    ]
    return max(passing, key=lambda p: p.value).id if passing else None


def rejudge(summary: Summary, folder: Path) -> Path:
    """Judge every point of a finished sweep again from its repeats and its records in
    ``folder`` (their own files, as the sweep wrote them), and write the summary."""
    cfg = SweepConfig.model_validate(summary.config)
    for point in summary.points:
        records = list(read_measured(folder / point.records_file)) if point.records_file else []
        per_repeat = [[r for r in records if r.repeat == rep.repeat] for rep in point.repeats]
        judge_point(summary, point, cfg, per_repeat)
    summary.best_passing_point = best_passing(summary)
    return write_summary(summary, folder)
