"""Cross-field rules of profiling: the profiled serving points and training steps exist,
and the tool is the vendor's (:data:`pocforge.spec.rules.RULES`)."""

from __future__ import annotations

from collections.abc import Iterator

from pocforge.catalog import gpu
from pocforge.spec.finding import Finding
from pocforge.spec.schema import PocSpec

TOOL_VENDOR = {"nsys": "nvidia", "rocprofv3": "amd"}
TOOL_FOR = {"nvidia": "nsys", "amd": "rocprofv3"}


def _tool_problem(spec: PocSpec, tool: str) -> str | None:
    """Why ``tool`` cannot profile this spec's cluster (None when it can)."""
    if tool == "torch":
        return None
    facts = gpu(spec.cluster.gpu)
    if facts.vendor == TOOL_VENDOR[tool]:
        return None
    where = f"{facts.name} ({facts.vendor.upper()})" if facts.is_gpu else "cpu (no GPU)"
    other = TOOL_FOR.get(facts.vendor)
    fix = f"use tool: {other} or torch" if other else "use tool: torch (the default)"
    return f"{tool} profiles {TOOL_VENDOR[tool].upper()} GPUs and cluster.gpu is {where}: {fix}"


def profiled_steps_exist(spec: PocSpec) -> Iterator[Finding]:
    """Profiled training steps are steps of the run (the kit's DeepSpeed driver and
    Megatron-LM's ``--profile`` run torch's profiler or mark the range a GPU tool records),
    and the tool profiles the cluster's GPUs."""
    training = spec.training
    if training is None or training.profile is None:
        return
    path = ("training", "profile")
    problem = _tool_problem(spec, training.profile.tool)
    if problem:
        yield (*path, "tool"), problem
    for k, step in enumerate(training.profile.steps):
        if step >= training.steps:
            yield (
                (*path, "steps", k),
                f"step {step} is not a step of the run (training.steps is {training.steps}: 0 to {training.steps - 1})",
            )


def profiled_points_exist(spec: PocSpec) -> Iterator[Finding]:
    """A workload's profiled points are among its own (``c<concurrency>``, ``r<rate>``, as
    the summaries name them), served by a framework whose profiler the kit drives."""
    if spec.serving is None:
        return
    first: tuple[str, str] | None = None  # (workload, tool) of the first profiled workload
    rocprof: list[str] = []  # the points rocprofv3 profiles, across the workloads
    for n, workload in enumerate(spec.serving.workloads):
        if workload.profile is None:
            continue
        path = ("serving", "workloads", n, "profile")
        tool = workload.profile.tool
        if spec.serving.framework not in ("vllm", "sglang"):
            yield (
                path,
                f"profiling drives vLLM's and SGLang's profiler switch, not {spec.serving.framework}'s",
            )
        problem = _tool_problem(spec, tool)
        if problem:
            yield (*path, "tool"), problem
        if first is None:
            first = (workload.name, tool)
        elif tool != first[1]:
            yield (
                (*path, "tool"),
                f"one server serves every workload, so one profiler: workload {first[0]} uses "
                f"{first[1]} and {workload.name} {tool}; give both the same tool",
            )
        if tool == "rocprofv3":
            rocprof += [f"{workload.name} {p}" for p in workload.profile.points]
            if len(rocprof) > 1:
                yield (
                    (*path, "points"),
                    "rocprofv3 writes its files when the server exits, so a serving stage "
                    f"profiles one point with it ({', '.join(rocprof)}): keep one",
                )
        ids = workload.point_ids()
        for k, point in enumerate(workload.profile.points):
            if point not in ids:
                yield (
                    (*path, "points", k),
                    f"{point!r} is not a point of workload {workload.name} ({', '.join(ids)})",
                )
