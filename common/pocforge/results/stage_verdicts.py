"""Criteria on the other stages judged on a run's results: training, kernels, collectives
(bus bandwidth and the expert-parallel all-to-all), accuracy (lm-eval's standard error) and
parity (greedy decoding's deterministic numbers)."""

from __future__ import annotations

from typing import Any

from pocforge.messages import N_, Note
from pocforge.metrics import EP_ALLTOALL_METRICS, judgeable, metric
from pocforge.results.ep_schema import EpAllToAllResult
from pocforge.results.stage_schema import (
    CollectiveResult,
    KernelResults,
    TrainingResult,
)
from pocforge.results.verdict_schema import (
    CriterionVerdict,
    PointVerdict,
    criterion_verdict,
    no_verdict,
    not_judgeable,
    note,
    point_verdict,
)
from pocforge.stats import decide, t_interval


def training_verdict(c: Any, result: TrainingResult | None) -> CriterionVerdict:
    name = c.parts[1] if len(c.parts) > 1 else ""
    if refused := not_judgeable(c, "training", name):
        return refused
    if result is None:
        return criterion_verdict(c, no_verdict(None, N_("no training result")))
    if name == "final_loss" and result.steps:
        tail = [s.loss for s in result.steps[-max(3, len(result.steps) // 10) :]]
        ci = t_interval(tail)
        if ci is not None:
            est, lo, hi = ci
            return criterion_verdict(
                c,
                PointVerdict(
                    point=None,
                    verdict=decide(c.op, c.threshold, lo, hi),
                    estimate=est,
                    ci_low=lo,
                    ci_high=hi,
                    method="t-interval",
                    n=len(tail),
                    notes=[note(N_("mean loss of the last {n} steps"), n=len(tail))],
                ),
            )
    value = getattr(result, name, None)
    if not isinstance(value, int | float):
        return criterion_verdict(
            c, no_verdict(None, N_("training result has no {name}"), name=name)
        )
    return point_verdict(c, value, 1)


def _worst(op: str, values: list[float]) -> float:
    """The value that decides when every one must meet the threshold."""
    return max(values) if op in ("<", "<=") else min(values)


def kernels_verdict(c: Any, result: KernelResults | None) -> CriterionVerdict:
    op = c.parts[1] if len(c.parts) > 1 else ""
    name = c.parts[2] if len(c.parts) > 2 else ""
    if refused := not_judgeable(c, "kernels", name):
        return refused
    if result is not None and not result.timed and metric("kernels", name).needs_gpu:
        return criterion_verdict(
            c,
            no_verdict(
                None,
                N_("{name} needs timed kernels; these ran untimed (the Triton interpreter)"),
                name=name,
            ),
        )
    rows = [r for r in (result.rows if result else []) if r.op == op]
    values = [getattr(r, name) for r in rows if isinstance(getattr(r, name, None), int | float)]
    if not values:
        return criterion_verdict(
            c, no_verdict(None, N_("no kernel result for {op}.{name}"), op=op, name=name)
        )
    worst = _worst(c.op, values)  # the worst shape decides
    return point_verdict(c, worst, len(values), [note(N_("worst of {n} shapes"), n=len(values))])


def _pct_reference(result: CollectiveResult) -> float | None:
    """100 × busbw at the largest message / the stored reference (None without either)."""
    if not result.rows or not result.reference_busbw_gbs:
        return None
    largest = max(result.rows, key=lambda r: r.bytes)
    return 100.0 * largest.busbw_gbs / result.reference_busbw_gbs


def collectives_verdict(c: Any, results: list[CollectiveResult]) -> CriterionVerdict:
    coll = c.parts[1] if len(c.parts) > 1 else ""
    name = c.parts[2] if len(c.parts) > 2 else ""
    nccl = [n for n in judgeable("collectives") if n not in EP_ALLTOALL_METRICS]
    if refused := not_judgeable(c, "collectives", name, nccl):
        return refused
    match = [r for r in results if r.collective == coll]
    if not match:
        return criterion_verdict(
            c, no_verdict(None, N_("no collective result for {coll}"), coll=coll)
        )
    rows = [row for r in match for row in r.rows]
    notes: list[Note] = []
    n = 1
    if name == "pct_reference":
        judged = [(r, pct) for r in match if (pct := _pct_reference(r)) is not None]
        if not judged:
            return criterion_verdict(
                c,
                no_verdict(
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
        notes, n = [note(template, n=len(judged), runs=runs)], len(judged)
    elif name == "busbw_gbs":
        largest = max(rows, key=lambda r: r.bytes)
        value = float(largest.busbw_gbs)
    else:  # wrong
        value = float(sum((r.wrong or 0) + (r.inplace_wrong or 0) for r in rows))
    return point_verdict(c, value, n, notes)


def ep_alltoall_verdict(c: Any, results: list[EpAllToAllResult]) -> CriterionVerdict:
    """``collectives.ep_<phase>.<metric>``: each DeepEP / MoRI output's
    :meth:`~pocforge.results.ep_schema.EpAllToAllResult.verdict_metrics` (its best tuned config
    or round, then its slowest rank); where several outputs print the number (nodes, or
    benchmarks: intranode and internode both print NVL), the worst decides. Point verdicts:
    the tools print one mean per config, no spread."""
    phase = c.parts[1] if len(c.parts) > 1 else ""
    name = c.parts[2] if len(c.parts) > 2 else ""
    ep = [n for n in judgeable("collectives") if n in EP_ALLTOALL_METRICS]
    if refused := not_judgeable(c, "collectives", name, ep):
        return refused
    if not results:
        template = N_(
            "no expert-parallel all-to-all result in the run (the collectives stage runs "
            "DeepEP's tests when serving uses expert parallelism on GPUs; or import a DeepEP "
            "or MoRI output)"
        )
        return criterion_verdict(c, no_verdict(None, template))
    key = f"{phase}.{name}"
    found = [(r, r.verdict_metrics()) for r in results]
    values = [(r, m[key]) for r, m in found if key in m]
    if not values:
        printed = sorted({k for _, m in found for k in m})
        template = N_("no DeepEP / MoRI output of the run reports {key} (they report: {keys})")
        return criterion_verdict(
            c, no_verdict(None, template, key=key, keys=", ".join(printed) or "nothing judgeable")
        )
    value = _worst(c.op, [v for _, v in values])
    runs = ", ".join(f"{r.benchmark}{f' on {r.host}' if r.host else ''} {v:g}" for r, v in values)
    template = N_("worst of {n} DeepEP / MoRI outputs ({runs})")
    return point_verdict(c, value, len(values), [note(template, n=len(values), runs=runs)])


def accuracy_verdict(c: Any, results: dict[str, Any]) -> CriterionVerdict:
    """``accuracy.<task>.<metric>``: lm-eval's mean with its standard error (a normal
    interval at the criterion's confidence); an infrastructure failure is inconclusive."""
    from scipy.stats import norm

    task, name = (c.parts + ["", ""])[1:3]
    found = results.get(task)
    if found is None:
        return criterion_verdict(
            c, no_verdict(None, N_("no accuracy result for task {task}"), task=task)
        )
    if isinstance(found, str):
        return criterion_verdict(
            c,
            no_verdict(
                None, N_("not evaluated (infrastructure, not quality): {error}"), error=found
            ),
        )
    score = found.metrics.get(name)
    if score is None:
        template = N_("task {task} reports no {name} (it reports: {names})")
        names = ", ".join(found.metrics)
        return criterion_verdict(c, no_verdict(None, template, task=task, name=name, names=names))
    if not score.stderr:
        template = N_("no standard error reported: a point verdict")
        return point_verdict(c, score.value, found.samples, [note(template)])
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
    return criterion_verdict(c, pv)


def parity_verdict(c: Any, result: Any) -> CriterionVerdict:
    """``parity.<metric>``: deterministic numbers of greedy decoding, point verdicts."""
    name = c.parts[1] if len(c.parts) > 1 else ""
    if refused := not_judgeable(c, "parity", name):
        return refused
    if result is None:
        return criterion_verdict(
            c, no_verdict(None, N_("no parity result (the parity stage did not run)"))
        )
    value = getattr(result, name, None)
    if value is None and name == "first_divergence":
        value = float(result.max_tokens)  # nothing diverged: the whole continuation matched
    if value is None:
        return criterion_verdict(c, no_verdict(None, N_("parity measured no {name}"), name=name))
    notes = [note(N_("over {n} fixed prompts, greedy"), n=result.prompts)]
    return point_verdict(c, float(value), result.prompts, notes)
