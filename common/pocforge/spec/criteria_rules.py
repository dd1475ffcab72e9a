"""Cross-field rules of the acceptance criteria: each names a metric the POC produces
(:data:`pocforge.spec.rules.RULES`)."""

from __future__ import annotations

from collections.abc import Iterator

from pocforge.catalog import gpu
from pocforge.metrics import EP_ALLTOALL_METRICS, STATISTICS, judgeable, metric
from pocforge.spec.finding import Finding
from pocforge.spec.schema import PocSpec

COLLECTIVES = ("all_reduce", "all_gather", "alltoall", "reduce_scatter")
# The expert-parallel dispatch/combine phases (EpAllToAllResult.verdict_metrics), each also
# for one precision where the benchmark prints it (DeepEP's FP8 and BF16 dispatch).
EP_PHASES = tuple(
    f"ep_{phase}{precision}"
    for phase in ("dispatch", "combine", "dispatch_combine")
    for precision in ("", "_fp8", "_bf16")
)


def criteria_are_produced(spec: PocSpec) -> Iterator[Finding]:
    """Every acceptance criterion names a metric some stage of this spec will produce."""
    for index, criterion in enumerate(spec.acceptance.criteria):
        problem = _point_problem(spec, criterion) or _criterion_problem(spec, criterion.measure)
        if problem:
            yield (("acceptance", "criteria", index, "metric"), f"{criterion.metric}: {problem}")


def _point_problem(spec: PocSpec, criterion) -> str | None:
    """A point selector (``serving.<workload>.<metric>[.<statistic>].c32``) names a point
    of that workload's sweep."""
    point = criterion.point
    if point is None or spec.serving is None:
        return None
    workload = next((w for w in spec.serving.workloads if w.name == criterion.parts[1]), None)
    if workload is None or point in workload.point_ids():
        return None
    return (
        f"{point!r} is not a point of workload {workload.name} ({', '.join(workload.point_ids())})"
    )


def _criterion_problem(spec: PocSpec, parts: list[str]) -> str | None:
    section = parts[0]
    if section == "serving":
        if spec.serving is None:
            return "the spec has no serving section"
        workloads = [w.name for w in spec.serving.workloads]
        if len(parts) < 3:
            return "write serving.<workload>.<metric>[.<statistic>][.<point>]"
        if parts[1] not in workloads:
            return f"no workload named {parts[1]!r} (workloads: {', '.join(workloads)})"
        workload = next(w for w in spec.serving.workloads if w.name == parts[1])
        if parts[2] == "goodput" and not workload.slos:
            return (
                f"goodput counts requests meeting every SLO of the workload and {parts[1]!r} has "
                "none, so it is never reported; add slos to the workload or drop the criterion"
            )
        return _metric_problem("serving", parts[2:], spec)
    if section == "training":
        if spec.training is None:
            return "the spec has no training section"
        if parts[1:2] == ["mfu"] and spec.training.dtype == "float32":
            # frameworks/deepspeed.py claims a dense peak for bf16 and fp16 only
            return (
                "mfu needs the GPU's dense peak for the training dtype; none is claimed for float32"
            )
        return _metric_problem("training", parts[1:], spec)
    if section == "kernels":
        ops = [k.op for k in spec.kernels.ops] if spec.kernels else []
        if len(parts) < 3:
            return "write kernels.<op>.<metric>"
        if parts[1] not in ops:
            return f"kernel {parts[1]!r} is not in kernels.ops ({', '.join(ops) or 'none'})"
        return _metric_problem("kernels", parts[2:], spec)
    if section == "collectives":
        if len(parts) < 3 or parts[1] not in COLLECTIVES + EP_PHASES:
            return (
                "write collectives.<collective>.<metric> with a collective of "
                f"{', '.join(COLLECTIVES)} or an expert-parallel phase of ep_dispatch, "
                "ep_combine, ep_dispatch_combine (each also _fp8, _bf16)"
            )
        ep = parts[1] in EP_PHASES
        if parts[2] in judgeable("collectives") and (parts[2] in EP_ALLTOALL_METRICS) != ep:
            allowed = [n for n in judgeable("collectives") if (n in EP_ALLTOALL_METRICS) == ep]
            what = "an expert-parallel phase" if ep else "an nccl-tests collective"
            return f"{parts[2]} is not a metric of {what} (allowed: {', '.join(allowed)})"
        return _metric_problem("collectives", parts[2:], spec)
    if section == "accuracy":
        tasks = [t.name for t in spec.serving.accuracy] if spec.serving else []
        if len(parts) != 3:
            return "write accuracy.<task>.<metric> (the metric as the task's lm-eval YAML names it)"
        if parts[1] not in tasks:
            return f"no accuracy task named {parts[1]!r} in serving.accuracy ({', '.join(tasks) or 'none'})"
        return None
    if section == "parity":
        if spec.serving is None or spec.serving.parity is None:
            return "the spec has no serving.parity gate"
        return _metric_problem("parity", parts[1:], spec)
    return "a metric path starts with serving, training, kernels, collectives, accuracy or parity"


def _metric_problem(section: str, rest: list[str], spec: PocSpec) -> str | None:
    """Why ``rest`` (metric[.statistic]) cannot be judged; the names are the registry's
    judgeable ones, the same list the judge decides (``pocforge.metrics.judgeable``)."""
    allowed = ", ".join(judgeable(section))
    if not rest:
        return f"name a metric ({allowed})"
    found = metric(section, rest[0])
    if found is None or rest[0] not in judgeable(section):
        return f"unknown {section} metric {rest[0]!r} (allowed: {allowed})"
    if found.needs_gpu and not gpu(spec.cluster.gpu).is_gpu:
        why = (
            "DeepEP and MoRI run on GPUs only"
            if found.name in EP_ALLTOALL_METRICS
            else "a `cpu` cluster runs kernels under the Triton interpreter, untimed, and "
            "has no peak"
        )
        return f"{rest[0]} is measured on a GPU only ({why}); drop the criterion or use a GPU"
    if found.distribution and len(rest) != 2:
        return f"{rest[0]} is a distribution: add a statistic ({', '.join(STATISTICS)})"
    if found.distribution and rest[1] not in STATISTICS:
        return f"unknown statistic {rest[1]!r} (allowed: {', '.join(STATISTICS)})"
    if not found.distribution and len(rest) != 1:
        return f"{rest[0]} is a single number per run; drop {'.'.join(rest[1:])!r}"
    return None
