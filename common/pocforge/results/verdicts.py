"""The spec's acceptance criteria judged on a run: pass, fail or inconclusive, with margin.

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

``pass`` when the interval lies wholly on the good side of the threshold, ``fail`` when
wholly on the bad side, else ``inconclusive``. Margin = threshold - estimate for ``<``/``<=``
and estimate - threshold for ``>``/``>=``: positive is headroom.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from pocforge.messages import N_, Note, join
from pocforge.metrics import EP_ALLTOALL_METRICS, judgeable, metric
from pocforge.results.ep_schema import EpAllToAllResult
from pocforge.results.serving import load_records
from pocforge.results.stage_schema import (
    CollectiveResult,
    KernelResults,
    ServingPoint,
    ServingResult,
    TrainingResult,
)
from pocforge.stats import Decision, decide, margin, t_interval

VerdictName = Decision


class PointVerdict(BaseModel):
    point: str | None
    verdict: VerdictName
    estimate: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    method: str = "none"
    n: int = 0
    notes: list[Note] = Field(default_factory=list)

    @property
    def note(self) -> str | None:
        """The notes in English, as the CLI prints them."""
        return join(self.notes)


class CriterionVerdict(BaseModel):
    criterion: str
    metric: str
    op: str
    threshold: float
    confidence: float
    verdict: VerdictName
    estimate: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    margin: float | None = None
    margin_pct: float | None = None
    method: str = "none"
    n: int = 0
    point: str | None = Field(None, description="Sweep point the verdict is reported at.")
    notes: list[Note] = Field(default_factory=list)
    per_point: list[PointVerdict] = Field(default_factory=list)

    @property
    def note(self) -> str | None:
        """The notes in English, as the CLI prints them (the dashboard translates them)."""
        return join(self.notes)


def _note(template: str, **args) -> Note:
    return Note(template=template, args=args)


def _none(point: str | None, template: str, **args) -> PointVerdict:
    return PointVerdict(point=point, verdict="inconclusive", notes=[_note(template, **args)])


# --------------------------------------------------------------------------- serving


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
        return _none(point.id, N_("the point failed"))
    extra: list[Note] = []
    if abs(confidence - 0.95) >= 1e-9:
        template = N_("judged with the serving benchmark's interval at 95%, not {confidence:.0%}")
        extra.append(_note(template, confidence=confidence))
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
            extra.append(_note(template, kept=kept, total=total))
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
        own = _note(v.note_template, **v.note_args) if v.note_template else _note(v.note or "")
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
        return _none(point.id, N_("{metric} {key} not reported"), metric=metric, key=key)
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
            notes=[_note(N_("interval across repeats of the point statistic"))],
        )
    return PointVerdict(
        point=point.id,
        verdict=decide(op, threshold, estimate, estimate),
        estimate=estimate,
        method="point",
        n=1,
        notes=[_note(N_("one value, no interval: a point verdict"))],
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


def _serving(
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
                judged[i] = _criterion(
                    c,
                    PointVerdict(
                        point=None,
                        verdict="inconclusive",
                        notes=[
                            _note(
                                N_("no serving result for workload {workload}"), workload=workload
                            )
                        ],
                    ),
                )
            continue
        result, folder = results[workload]
        order = [p.id for p in result.points if p.status != "failed"]
        per_point: dict[int, list[PointVerdict]] = {}
        for i, c in items:
            metric = c.parts[2] if len(c.parts) > 2 else ""
            stat = c.parts[3] if len(c.parts) > 3 else "mean"
            per_point[i] = [
                judge_point(p, folder, metric, stat, c.op, c.threshold, c.confidence, seed=i)
                for p in result.points
            ]
        op_point = _operating_point({str(i): v for i, v in per_point.items()}, order)
        for i, c in items:
            at = next((pv for pv in per_point[i] if pv.point == op_point), None)
            at = at or _none(None, N_("no sweep point completed"))
            cv = _criterion(c, at)
            cv.per_point = per_point[i]
            if op_point and not all(
                pv.verdict == "pass"
                for j, _ in items
                for pv in per_point[j]
                if pv.point == op_point
            ):
                template = N_(
                    "no sweep point met every criterion of {workload}; reported at {point}"
                )
                cv.notes.append(_note(template, workload=workload, point=op_point))
            judged[i] = cv
    out = [judged[i] for i in sorted(judged)]
    return out


def _criterion(c: Any, pv: PointVerdict) -> CriterionVerdict:
    m, mp = margin(c.op, c.threshold, pv.estimate)
    return CriterionVerdict(
        criterion=str(c),
        metric=c.metric,
        op=c.op,
        threshold=c.threshold,
        confidence=c.confidence,
        verdict=pv.verdict,
        estimate=pv.estimate,
        ci_low=pv.ci_low,
        ci_high=pv.ci_high,
        margin=m,
        margin_pct=mp,
        method=pv.method,
        n=pv.n,
        point=pv.point,
        notes=list(pv.notes),
    )


# --------------------------------------------------------------------------- other stages


def _not_judgeable(
    c: Any, section: str, name: str, names: list[str] | None = None
) -> CriterionVerdict | None:
    """Inconclusive, saying why, for a name the registry does not list as judgeable (the
    spec rule refuses those, so only a hand-written or older spec gets here); ``names``: the
    judgeable ones that apply (default: the section's)."""
    names = judgeable(section) if names is None else names
    if name in names:
        return None
    allowed = ", ".join(names)
    template = N_("{name} is not a judgeable {section} metric ({allowed})")
    return _criterion(c, _none(None, template, name=name, section=section, allowed=allowed))


def _training(c: Any, result: TrainingResult | None) -> CriterionVerdict:
    name = c.parts[1] if len(c.parts) > 1 else ""
    if refused := _not_judgeable(c, "training", name):
        return refused
    if result is None:
        return _criterion(c, _none(None, N_("no training result")))
    if name == "final_loss" and result.steps:
        tail = [s.loss for s in result.steps[-max(3, len(result.steps) // 10) :]]
        ci = t_interval(tail)
        if ci is not None:
            est, lo, hi = ci
            return _criterion(
                c,
                PointVerdict(
                    point=None,
                    verdict=decide(c.op, c.threshold, lo, hi),
                    estimate=est,
                    ci_low=lo,
                    ci_high=hi,
                    method="t-interval",
                    n=len(tail),
                    notes=[_note(N_("mean loss of the last {n} steps"), n=len(tail))],
                ),
            )
    value = getattr(result, name, None)
    if not isinstance(value, int | float):
        return _criterion(c, _none(None, N_("training result has no {name}"), name=name))
    return _criterion(
        c,
        PointVerdict(
            point=None,
            verdict=decide(c.op, c.threshold, value, value),
            estimate=float(value),
            method="point",
            n=1,
        ),
    )


def _worst(op: str, values: list[float]) -> float:
    """The value that decides when every one must meet the threshold."""
    return max(values) if op in ("<", "<=") else min(values)


def _kernels(c: Any, result: KernelResults | None) -> CriterionVerdict:
    op = c.parts[1] if len(c.parts) > 1 else ""
    name = c.parts[2] if len(c.parts) > 2 else ""
    if refused := _not_judgeable(c, "kernels", name):
        return refused
    if result is not None and not result.timed and metric("kernels", name).needs_gpu:
        return _criterion(
            c,
            _none(
                None,
                N_("{name} needs timed kernels; these ran untimed (the Triton interpreter)"),
                name=name,
            ),
        )
    rows = [r for r in (result.rows if result else []) if r.op == op]
    values = [getattr(r, name) for r in rows if isinstance(getattr(r, name, None), int | float)]
    if not values:
        return _criterion(c, _none(None, N_("no kernel result for {op}.{name}"), op=op, name=name))
    worst = _worst(c.op, values)  # the worst shape decides
    return _criterion(
        c,
        PointVerdict(
            point=None,
            verdict=decide(c.op, c.threshold, worst, worst),
            estimate=float(worst),
            method="point",
            n=len(values),
            notes=[_note(N_("worst of {n} shapes"), n=len(values))],
        ),
    )


def _pct_reference(result: CollectiveResult) -> float | None:
    """100 × busbw at the largest message / the stored reference (None without either)."""
    if not result.rows or not result.reference_busbw_gbs:
        return None
    largest = max(result.rows, key=lambda r: r.bytes)
    return 100.0 * largest.busbw_gbs / result.reference_busbw_gbs


def _collectives(c: Any, results: list[CollectiveResult]) -> CriterionVerdict:
    coll = c.parts[1] if len(c.parts) > 1 else ""
    name = c.parts[2] if len(c.parts) > 2 else ""
    nccl = [n for n in judgeable("collectives") if n not in EP_ALLTOALL_METRICS]
    if refused := _not_judgeable(c, "collectives", name, nccl):
        return refused
    match = [r for r in results if r.collective == coll]
    if not match:
        return _criterion(c, _none(None, N_("no collective result for {coll}"), coll=coll))
    rows = [row for r in match for row in r.rows]
    notes: list[Note] = []
    n = 1
    if name == "pct_reference":
        judged = [(r, pct) for r in match if (pct := _pct_reference(r)) is not None]
        if not judged:
            return _criterion(
                c,
                _none(
                    None,
                    N_(
                        "no busbw reference stored with the {coll} results (none for this "
                        "platform in the reference table, or imported results)"
                    ),
                    coll=coll,
                ),
            )
        value = _worst(c.op, [pct for _, pct in judged])
        runs = ", ".join(f"{r.host or r.scope or 'run'} {pct:.1f}%" for r, pct in judged)
        template = N_("worst of {n} runs against their reference ({runs})")
        notes, n = [_note(template, n=len(judged), runs=runs)], len(judged)
    elif name == "busbw_gbs":
        largest = max(rows, key=lambda r: r.bytes)
        value = float(largest.busbw_gbs)
    else:  # wrong
        value = float(sum((r.wrong or 0) + (r.inplace_wrong or 0) for r in rows))
    return _criterion(
        c,
        PointVerdict(
            point=None,
            verdict=decide(c.op, c.threshold, value, value),
            estimate=value,
            method="point",
            n=n,
            notes=notes,
        ),
    )


def _ep_alltoall(c: Any, results: list[EpAllToAllResult]) -> CriterionVerdict:
    """``collectives.ep_<phase>.<metric>``: each DeepEP / MoRI output's
    :meth:`~pocforge.results.ep_schema.EpAllToAllResult.verdict_metrics` (its best tuned config
    or round, then its slowest rank); where several outputs print the number (nodes, or
    benchmarks: intranode and internode both print NVL), the worst decides. Point verdicts:
    the tools print one mean per config, no spread."""
    phase = c.parts[1] if len(c.parts) > 1 else ""
    name = c.parts[2] if len(c.parts) > 2 else ""
    ep = [n for n in judgeable("collectives") if n in EP_ALLTOALL_METRICS]
    if refused := _not_judgeable(c, "collectives", name, ep):
        return refused
    if not results:
        template = N_(
            "no expert-parallel all-to-all result in the run (the collectives stage runs "
            "DeepEP's tests when serving uses expert parallelism on GPUs; or import a DeepEP "
            "or MoRI output)"
        )
        return _criterion(c, _none(None, template))
    key = f"{phase}.{name}"
    found = [(r, r.verdict_metrics()) for r in results]
    values = [(r, m[key]) for r, m in found if key in m]
    if not values:
        printed = sorted({k for _, m in found for k in m})
        template = N_("no DeepEP / MoRI output of the run reports {key} (they report: {keys})")
        return _criterion(
            c, _none(None, template, key=key, keys=", ".join(printed) or "nothing judgeable")
        )
    value = _worst(c.op, [v for _, v in values])
    runs = ", ".join(f"{r.benchmark}{f' on {r.host}' if r.host else ''} {v:g}" for r, v in values)
    return _criterion(
        c,
        PointVerdict(
            point=None,
            verdict=decide(c.op, c.threshold, value, value),
            estimate=float(value),
            method="point",
            n=len(values),
            notes=[
                _note(N_("worst of {n} DeepEP / MoRI outputs ({runs})"), n=len(values), runs=runs)
            ],
        ),
    )


# --------------------------------------------------------------------------- a run


def criteria_of(spec: dict[str, Any] | None) -> list[Any]:
    from pocforge.spec.acceptance_schema import Criterion

    raw = ((spec or {}).get("acceptance") or {}).get("criteria") or []
    return [Criterion.model_validate(c) for c in raw]


def _accuracy(c: Any, results: dict[str, Any]) -> CriterionVerdict:
    """``accuracy.<task>.<metric>``: lm-eval's mean with its standard error (a normal
    interval at the criterion's confidence); an infrastructure failure is inconclusive."""
    from scipy.stats import norm

    task, name = (c.parts + ["", ""])[1:3]
    found = results.get(task)
    if found is None:
        return _criterion(c, _none(None, N_("no accuracy result for task {task}"), task=task))
    if isinstance(found, str):
        return _criterion(
            c, _none(None, N_("not evaluated (infrastructure, not quality): {error}"), error=found)
        )
    score = found.metrics.get(name)
    if score is None:
        template = N_("task {task} reports no {name} (it reports: {names})")
        names = ", ".join(found.metrics)
        return _criterion(c, _none(None, template, task=task, name=name, names=names))
    if not score.stderr:
        pv = PointVerdict(
            point=None,
            verdict=decide(c.op, c.threshold, score.value, score.value),
            estimate=score.value,
            method="point",
            n=found.samples,
            notes=[_note(N_("no standard error reported: a point verdict"))],
        )
        return _criterion(c, pv)
    z = float(norm.ppf(0.5 + c.confidence / 2))
    lo, hi = score.value - z * score.stderr, score.value + z * score.stderr
    pv = PointVerdict(
        point=None,
        verdict=decide(c.op, c.threshold, lo, hi),
        estimate=score.value,
        ci_low=lo,
        ci_high=hi,
        method="lm-eval stderr",
        n=found.samples,
    )
    return _criterion(c, pv)


def _parity(c: Any, result: Any) -> CriterionVerdict:
    """``parity.<metric>``: deterministic numbers of greedy decoding, point verdicts."""
    name = c.parts[1] if len(c.parts) > 1 else ""
    if refused := _not_judgeable(c, "parity", name):
        return refused
    if result is None:
        return _criterion(c, _none(None, N_("no parity result (the parity stage did not run)")))
    value = getattr(result, name, None)
    if value is None and name == "first_divergence":
        value = float(result.max_tokens)  # nothing diverged: the whole continuation matched
    if value is None:
        return _criterion(c, _none(None, N_("parity measured no {name}"), name=name))
    pv = PointVerdict(
        point=None,
        verdict=decide(c.op, c.threshold, float(value), float(value)),
        estimate=float(value),
        method="point",
        n=result.prompts,
        notes=[_note(N_("over {n} fixed prompts, greedy"), n=result.prompts)],
    )
    return _criterion(c, pv)


def judge_run(run: Any, criteria: list[Any] | None = None) -> list[CriterionVerdict]:
    """Judge ``criteria`` (default: the run's spec's) on a run's stored results."""
    from pocforge.results.run_reader import RunData
    from pocforge.spec.criteria_rules import EP_PHASES

    data = RunData.load(run)
    criteria = criteria_of(run.manifest.spec) if criteria is None else criteria
    serving = [c for c in criteria if c.parts[0] == "serving"]
    judged = dict(zip([id(c) for c in serving], _serving(serving, data.serving), strict=True))
    out = []
    for c in criteria:
        section = c.parts[0]
        if section == "serving":
            out.append(judged[id(c)])
        elif section == "training":
            out.append(_training(c, data.training))
        elif section == "kernels":
            out.append(_kernels(c, data.kernels))
        elif section == "collectives" and c.parts[1:2] and c.parts[1] in EP_PHASES:
            out.append(_ep_alltoall(c, data.ep_alltoall))
        elif section == "collectives":
            out.append(_collectives(c, data.collectives))
        elif section == "accuracy":
            out.append(_accuracy(c, data.accuracy))
        elif section == "parity":
            out.append(_parity(c, data.parity))
        else:
            out.append(_criterion(c, _none(None, N_("unknown section {section}"), section=section)))
    return out


def overall(verdicts: list[CriterionVerdict]) -> Literal["pass", "fail", "inconclusive", "none"]:
    if not verdicts:
        return "none"
    names = {v.verdict for v in verdicts}
    return "fail" if "fail" in names else "inconclusive" if "inconclusive" in names else "pass"
