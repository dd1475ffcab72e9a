"""Serving criteria judged on a run's sweeps (``serving.<workload>.<metric>[.<statistic>]``).

Serving criteria (``serving.<workload>.<metric>[.<statistic>]``) are judged at every sweep
point with the serving benchmark's own judge (:func:`pocforge.bench.verdicts.judge`; the
statistics and the decision rule are :mod:`pocforge.stats`):
percentile bootstrap over the per-request records (two-level across repeats) for
per-request metrics, Student-t across repeats for throughput-like ones, a point verdict
with a note when there is one value. Without records (imports), the stored across-repeat
interval is used, else the point value.

A sweep has many points and a customer signs one operating point, so a workload's
criteria are reported together at its *operating point*: the highest-load point where
every criterion of the workload passes; when no point passes them all, the point that
passes the most (ties: fewer failures, then higher load), and the verdicts say so. Every
point's verdicts are kept for the dashboard's matrix.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from pocforge.messages import N_, Note
from pocforge.results.serving import load_records
from pocforge.results.stage_schema import (
    ServingPoint,
    ServingResult,
)
from pocforge.results.verdict_schema import (
    CriterionVerdict,
    PointVerdict,
    criterion_verdict,
    no_verdict,
    note,
)
from pocforge.stats import decide


def _records_by_repeat(folder: Path, point: ServingPoint) -> tuple[list[list[Any]], int] | None:
    if not point.records_file or not (folder / point.records_file).is_file():
        return None
    records, total = load_records(folder / point.records_file)
    groups: dict[int, list[Any]] = defaultdict(list)
    for rec in records:
        groups[rec.repeat].append(rec)
    return ([groups[k] for k in sorted(groups)], total) if groups else None


def judge_point(
    point: ServingPoint,
    folder: Path | None,
    metric: str,
    stat: str,
    op: str,
    threshold: float,
    confidence: float = 0.95,
    seed: int = 0,
) -> PointVerdict:
    """One serving criterion at one sweep point."""
    from pocforge.bench.run_metrics import DISTRIBUTION_METRICS, samples
    from pocforge.bench.verdicts import SLO, judge

    if point.status == "failed":
        return no_verdict(point.id, N_("the point failed"))
    extra: list[Note] = []
    if abs(confidence - 0.95) >= 1e-9:
        template = N_("judged with the serving benchmark's interval at 95%, not {confidence:.0%}")
        extra.append(note(template, confidence=confidence))
    slo = SLO(
        metric=metric,
        statistic=stat if metric in DISTRIBUTION_METRICS else "mean",
        threshold=threshold,
    )
    wants = metric in DISTRIBUTION_METRICS and folder is not None
    loaded = _records_by_repeat(folder, point) if wants else None
    v = None
    if metric in DISTRIBUTION_METRICS and loaded:
        groups, total = loaded
        v = judge(slo, per_repeat_samples=[samples(g, metric) for g in groups], seed=seed)
        kept = sum(len(g) for g in groups)
        if kept < total:
            template = N_("bootstrap on an even sample of {kept:,} of {total:,} requests")
            extra.append(note(template, kept=kept, total=total))
    elif metric not in DISTRIBUTION_METRICS and point.per_repeat.get(metric):
        v = judge(slo, per_repeat_values=point.per_repeat[metric], seed=seed)
    if v is not None:
        if v.ci_low is not None and v.ci_high is not None:
            verdict = decide(op, threshold, v.ci_low, v.ci_high)
        elif v.method == "point" and v.estimate is not None:
            verdict = decide(op, threshold, v.estimate, v.estimate)
        else:
            verdict = "inconclusive"
        # the serving benchmark's note: a fixed message, or a template and its values
        own = note(v.note_template, **v.note_args) if v.note_template else note(v.note or "")
        notes = ([own] if v.note else []) + extra
        return PointVerdict(
            point=point.id,
            verdict=verdict,
            estimate=v.estimate,
            ci_low=v.ci_low,
            ci_high=v.ci_high,
            method=v.method,
            n=v.n,
            notes=notes,
        )
    key = stat if metric in DISTRIBUTION_METRICS else "value"
    estimate = point.metrics.get(metric, {}).get(key)
    if estimate is None:
        return no_verdict(point.id, N_("{metric} {key} not reported"), metric=metric, key=key)
    ci = point.ci.get(metric, {}).get(key)
    if ci is not None:
        return PointVerdict(
            point=point.id,
            verdict=decide(op, threshold, *ci),
            estimate=estimate,
            ci_low=ci[0],
            ci_high=ci[1],
            method="t-interval",
            n=point.repeats,
            notes=[note(N_("interval across repeats of the point statistic"))],
        )
    return PointVerdict(
        point=point.id,
        verdict=decide(op, threshold, estimate, estimate),
        estimate=estimate,
        method="point",
        n=1,
        notes=[note(N_("one value, no interval: a point verdict"))],
    )


def _operating_point(per_point: dict[str, list[PointVerdict]], order: list[str]) -> str | None:
    """Highest-load point passing every criterion, else the one passing the most."""
    if not order:
        return None

    def score(pid: str) -> tuple[int, int, int]:
        vs = [pv for pvs in per_point.values() for pv in pvs if pv.point == pid]
        passes = sum(v.verdict == "pass" for v in vs)
        fails = sum(v.verdict == "fail" for v in vs)
        return passes, -fails, order.index(pid)

    return max(order, key=score)


def judge_serving(
    criteria: list[Any], results: dict[str, tuple[ServingResult, Path | None]]
) -> list[CriterionVerdict]:
    out: list[CriterionVerdict] = []
    by_workload: dict[str, list[tuple[int, Any]]] = defaultdict(list)
    for i, c in enumerate(criteria):
        by_workload[c.parts[1] if len(c.parts) > 1 else ""].append((i, c))
    judged: dict[int, CriterionVerdict] = {}
    for workload, items in by_workload.items():
        if workload not in results:
            for i, c in items:
                judged[i] = criterion_verdict(
                    c,
                    PointVerdict(
                        point=None,
                        verdict="inconclusive",
                        notes=[
                            note(N_("no serving result for workload {workload}"), workload=workload)
                        ],
                    ),
                )
            continue
        result, folder = results[workload]
        order = [p.id for p in result.points if p.status != "failed"]
        per_point: dict[int, list[PointVerdict]] = {}
        for i, c in items:
            measure = c.measure  # a criterion pinned to a point (….c32) is judged there
            metric = measure[2] if len(measure) > 2 else ""
            stat = measure[3] if len(measure) > 3 else "mean"
            per_point[i] = [
                judge_point(p, folder, metric, stat, c.op, c.threshold, c.confidence, seed=i)
                for p in result.points
            ]
        free = [(i, c) for i, c in items if c.point is None]  # they choose the operating point
        op_point = _operating_point({str(i): per_point[i] for i, _ in free}, order)
        for i, c in items:
            where = c.point or op_point
            at = next((pv for pv in per_point[i] if pv.point == where), None)
            if at is None and c.point:
                at = no_verdict(None, N_("point {point} did not complete"), point=c.point)
            at = at or no_verdict(None, N_("no sweep point completed"))
            cv = criterion_verdict(c, at)
            cv.per_point = per_point[i]
            if (
                c.point is None
                and op_point
                and not all(
                    pv.verdict == "pass"
                    for j, _ in free
                    for pv in per_point[j]
                    if pv.point == op_point
                )
            ):
                template = N_(
                    "no sweep point met every criterion of {workload}; reported at {point}"
                )
                cv.notes.append(note(template, workload=workload, point=op_point))
            judged[i] = cv
    out = [judged[i] for i in sorted(judged)]
    return out
