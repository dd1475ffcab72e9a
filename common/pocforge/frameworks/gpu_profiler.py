"""The vendors' GPU profilers around a profiled launch (``profile.tool``): Nsight Systems on
NVIDIA, rocprofv3 on AMD Instinct. The framework's own CUDA-profiler switch gates them, so
they record only the chosen sweep points or training steps, not the model's load:

- vLLM: ``--profiler-config {"profiler": "cuda"}``; ``/start_profile`` and ``/stop_profile``
  then call ``torch.cuda.profiler.start()`` / ``stop()`` in every worker.
- SGLang: ``/start_profile`` with ``activities: ["CUDA_PROFILER"]``, which calls
  ``torch.cuda.cudart().cudaProfilerStart()`` (and ``Stop`` on ``/stop_profile``).
- The kit's DeepSpeed driver: ``torch.cuda.profiler.start()`` before the first chosen step,
  ``stop()`` after the last.
- Megatron-LM: ``--profile`` without ``--use-pytorch-profiler`` calls
  ``torch.cuda.cudart().cudaProfilerStart()`` / ``Stop()`` at its step range.

``nsys profile --capture-range=cudaProfilerApi --capture-range-end=repeat`` records between
each start and stop and writes a report when the range ends (vLLM's profiling guide gives
this command). ``nsys stats --report cuda_gpu_kern_sum --format csv`` then sums each report
into the kernel table the dashboard reads (:mod:`pocforge.report.kernel_stats`).

rocprofv3 has no such switch: HIP's ``hipProfilerStart`` is a stub that returns
``hipErrorNotSupported`` (pytorch/pytorch#82778), so on ROCm those torch calls gate nothing.
``rocprofv3 --selected-regions`` starts paused and follows ``roctxProfilerResume(0)`` /
``roctxProfilerPause(0)``; the launch gets a ``sitecustomize`` (``_roctx_site.py``, first on
its ``PYTHONPATH``) that makes the torch calls above call those. rocprofv3 writes its files
(``--stats``: ``*_kernel_stats.csv``) when the profiled processes exit, so a serving stage
profiles one point with it (:func:`pocforge.spec.profile_rules.profiled_points_exist`).
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Callable
from pathlib import Path

from pocforge.frameworks.base import PROFILE_DIR, profiled_workload
from pocforge.frameworks.launch_plan import WORKDIR, NodeLaunch
from pocforge.frameworks.profilers import profiler
from pocforge.frameworks.site_files import sitecustomize

GATE_SITE = Path(__file__).with_name("_roctx_site.py")  # copied, never imported here
GATE_DIR = "roctx-site"  # in the launch's working directory on the node
# the framework roles a GPU profiler wraps: the processes that run the model (not a P/D
# router, not a Ray worker node's own agent, not a training launcher's helpers)
PROFILED_ROLES = ("server", "headless", "prefill", "decode", "launcher", "trainer")


def gate_argv() -> list[str]:
    """rocprofv3's gate first on the program's ``PYTHONPATH`` (kept whatever else is on it,
    also inside a container whose entry line sets its own)."""
    site = f"{WORKDIR}/{GATE_DIR}"
    line = f'export PYTHONPATH={shlex.quote(site)}${{PYTHONPATH:+:$PYTHONPATH}} && exec "$@"'
    return ["sh", "-c", line, "sh"]


def with_gate_file(launch: NodeLaunch, tool: str) -> NodeLaunch:
    """``launch`` with the rocprofv3 gate among the files written to its working directory
    (before a container wraps it, so the folder is mounted)."""
    if not profiler(tool).gated or launch.role not in PROFILED_ROLES:
        return launch
    files = {**launch.files, f"{GATE_DIR}/sitecustomize.py": sitecustomize(GATE_SITE)}
    return dataclasses.replace(launch, files=files)


def wrapped(launch: NodeLaunch, tool: str, out_dir: str, counters: list[str] = ()) -> NodeLaunch:
    """``launch`` run under ``tool``: the profiler's command line goes right before the
    framework's own (inside a container's entry line, after the kit's install)."""
    if launch.role not in PROFILED_ROLES:
        return launch
    inner = (launch.runtime or {}).get("inner_argv") or launch.argv
    cut = len(launch.argv) - len(inner)
    assert launch.argv[cut:] == inner, "the framework's argv ends the launch"
    prefix = profiler(tool).argv(out_dir, counters)
    if profiler(tool).gated:
        prefix += gate_argv()
    return dataclasses.replace(launch, argv=[*launch.argv[:cut], *prefix, *inner])


@dataclasses.dataclass(frozen=True)
class Choice:
    """The GPU profiler a deployment runs under, and where it writes."""

    tool: str
    counters: tuple[str, ...]
    out_dir: str


def chosen(
    spec, deployment: str, profile_dir: str | None, out_dir: Path | None = None
) -> Choice | None:
    """The deployment's GPU profiler, None for torch's or none. A serving stage has one
    server for all its workloads: validate makes its profiled workloads agree on the tool
    (:func:`pocforge.spec.profile_rules.profiled_points_exist`); the first one's is taken. Training
    writes beside its summary (``out_dir``, relative to the launch's working directory:
    ``training/profile/``, where the torch profiler's traces go too)."""
    if deployment == "serving":
        workload = profiled_workload(spec)
        profile = workload.profile if workload else None
        out = profile_dir or PROFILE_DIR
    else:
        profile = spec.training.profile
        out = str(Path(out_dir or "training") / "profile")
    if profile is None or profile.tool == "torch":
        return None
    return Choice(profile.tool, tuple(profile.counters), out)


def under_profiler(
    spec,
    deployment: str,
    launches: list[NodeLaunch],
    profile_dir: str | None = None,
    out_dir: Path | None = None,
    in_runtime: Callable[[list[NodeLaunch]], list[NodeLaunch]] = lambda launches: launches,
) -> list[NodeLaunch]:
    """``launches`` put in their runtime by ``in_runtime`` (default: the kit's, as they
    are), run under the deployment's GPU profiler when it has one: the gate's file before
    (a container mounts the working directory for it), the profiler's command line after
    (right before the framework's own, inside a container's entry line)."""
    choice = chosen(spec, deployment, profile_dir, out_dir)
    if choice is None:
        return in_runtime(launches)
    launches = in_runtime([with_gate_file(one, choice.tool) for one in launches])
    counters = list(choice.counters)
    return [wrapped(one, choice.tool, choice.out_dir, counters) for one in launches]


def rocprof_point(spec) -> tuple[str, str] | None:
    """The (workload, point) a serving stage profiles with rocprofv3 (validate allows one:
    its files come at the server's exit), else None."""
    workload = profiled_workload(spec)
    if workload is None or not profiler(workload.profile.tool).at_exit:
        return None
    return workload.name, workload.profile.points[0]
