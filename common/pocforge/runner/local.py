"""The stages of a POC on this machine (a single-node POC with no hosts of its own).

- ``serving``: build the tiny model if the spec asks, start the framework through its
  adapter, sweep every workload (``serving/<workload>/summary.json`` + request records,
  the node's telemetry per point and its energy figures: :mod:`.telemetry`), stop the
  server;
- ``kernels``: the kit's kernel benchmark for ``kernels.ops`` (``kernels/bench.json`` as the
  bench wrote it, ``kernels/results.json`` for the dashboard; on a CPU: correctness only);
- ``training``: the DeepSpeed benchmark (``training/summary.json``, ``result.json``,
  ``telemetry.jsonl``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from pocforge import atomic
from pocforge.bench.from_spec import sweep_config
from pocforge.bench.sweep import Hooks, run_sweep
from pocforge.frameworks import LaunchContext
from pocforge.frameworks.base import model_path, prepare_model, profiled
from pocforge.frameworks.gpu_profiler import rocprof_point
from pocforge.frameworks.node_launcher import in_start_order, start_node
from pocforge.frameworks.patching import FRAMEWORKS, PatchError
from pocforge.frameworks.patching.pristine import overlay
from pocforge.frameworks.process import ManagedProcess, free_port
from pocforge.frameworks.profilers import ROCPROF_SUBDIR
from pocforge.frameworks.startup import startup_timeout_s
from pocforge.paths import workspace_root
from pocforge.report.profiles import PREFIX
from pocforge.results.adapters import from_kernel_bench, from_training_summary
from pocforge.runner import gates
from pocforge.runner.profile import ProfileHook
from pocforge.runner.telemetry import ServingTelemetry, gpu_hour_price, training_telemetry
from pocforge.runtimes import resolve
from pocforge.runtimes.plan import plan_deployment, runtime_context
from pocforge.runtimes.provision import kit_wheels
from pocforge.spec import PocSpec
from pocforge.spec.training_schema import MegatronLayout
from pocforge.training.run import run_training

Say = Callable[[str], None]


class StageError(RuntimeError):
    """A stage that could not produce its result (one clear line)."""


class Deployment:
    """The processes of one serving deployment here (one server, or a disaggregated
    deployment's prefill and decode servers and router); ``check_alive()`` raises if any
    died."""

    def __init__(self, processes: list[ManagedProcess]):
        self.processes = processes

    def check_alive(self) -> None:
        for process in self.processes:
            process.check_alive()


@contextlib.contextmanager
def serve(
    spec: PocSpec, stage_dir: Path, say: Say = print, path_first: Path | None = None
) -> Iterator[tuple[str, Deployment]]:
    """The spec's deployment here, in its runtime, until the block ends; yields the base URL
    the benchmark talks to (the server's, or the P/D router's) and its processes. A
    disaggregated deployment's shared KV folder (ExampleConnector) goes in ``stage_dir``.
    ``path_first``: a folder put first on every process's ``PYTHONPATH`` (the parity
    baseline's unpatched framework)."""
    serving = spec.serving
    prepare_model(spec)
    if serving.disaggregation is not None:
        shared = serving.disaggregation.model_copy(
            update={"shared_storage_path": str((stage_dir / "kv-shared").resolve())}
        )
        changed = serving.model_copy(update={"disaggregation": shared})
        spec = spec.model_copy(update={"serving": changed})
    ctx = LaunchContext.local(
        workspace_root(),
        host_override="127.0.0.1",
        port=free_port(),
        profile_dir=str(traces(stage_dir)) if profiled(spec) else None,
    )
    wheels = {}
    if resolve(spec, "serving").kind == "container":  # the container takes them from here
        wheels["wheels"] = str(kit_wheels())
        if spec.source_dir is not None:
            wheels["poc_dir"] = str(spec.source_dir.resolve())
    launches = in_start_order(
        plan_deployment(spec, "serving", ctx, **wheels, patches=False)
    )  # in its runtime
    if path_first is not None:
        for launch in launches:
            rest = launch.env.get("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
            launch.env["PYTHONPATH"] = os.pathsep.join(p for p in (str(path_first), rest) if p)
    front = launches[-1]  # the server, or the router in front of the pools
    started: list[ManagedProcess] = []
    try:
        if len(launches) == 1:
            started.append(ManagedProcess(front, stage_dir / "server.log").start())
            say(
                f"{stage_dir.name}: starting {serving.framework} (pid {started[0].pid}), log {stage_dir / 'server.log'}"
            )
            waited = started[0].wait_healthy(timeout_s=startup_timeout_s(spec))
            say(f"{stage_dir.name}: healthy after {waited:.0f} s at {_base(front)}")
        else:
            timeout = startup_timeout_s(spec) * len(launches)
            lines = lambda line: say(f"{stage_dir.name}: {line}")  # noqa: E731
            start_node(spec.name, launches, None, timeout, lines, started, stage_dir / "logs")
        deployment = Deployment(started)
        yield _base(front), deployment
        deployment.check_alive()
    finally:
        for process in reversed(started):
            process.stop()
        # the transferred KV is scratch, not a result (its share is in the summaries)
        shutil.rmtree(stage_dir / "kv-shared", ignore_errors=True)
        keep_rocprof(spec, stage_dir, say)


def keep_rocprof(spec: PocSpec, stage_dir: Path, say: Say) -> None:
    """What rocprofv3 wrote as the server's processes exited, moved into its profiled
    point's folder (``<workload>/profile-<point>/rocprofv3/``)."""
    point = rocprof_point(spec)
    written = traces(stage_dir) / ROCPROF_SUBDIR
    if point is None or not written.is_dir():
        return
    dest = stage_dir / point[0] / f"{PREFIX}{point[1]}" / ROCPROF_SUBDIR
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(written), dest)
    count = sum(1 for p in dest.rglob("*") if p.is_file())
    say(f"profile: {point[1]}: rocprofv3 wrote {count} files at the server's exit, in {dest}")


def traces(stage_dir: Path) -> Path:
    """Where a server here writes its profiler traces (moved per point into the workload's
    folder by :class:`~pocforge.runner.profile.ProfileHook`)."""
    return (stage_dir / "traces").resolve()


def _base(launch) -> str:
    return launch.health_url.rsplit("/", 1)[0]


def run_serving(spec: PocSpec, stage_dir: Path, say: Say) -> None:
    """Sanity gate, every workload's sweep, then the accuracy tasks and the parity prompts
    on the same server."""
    with serve(spec, stage_dir, say) as (base_url, server):
        try:
            gates.sanity_gate(spec, base_url, stage_dir, say)
        except gates.GateError as exc:
            raise StageError(str(exc)) from None
        for workload in spec.serving.workloads:
            say(f"serving: workload {workload.name}")
            cfg = sweep_config(spec, workload, base_url, model_path(spec))
            folder = stage_dir / workload.name
            telemetry = ServingTelemetry(folder, gpus=cfg.gpus, price=gpu_hour_price(spec), say=say)
            hook = telemetry
            if workload.profile:
                profile = ProfileHook(
                    base_url,
                    spec.serving.framework,
                    workload.profile.points,
                    traces(stage_dir),
                    folder,
                    say,
                    logs=[process.log_file for process in server.processes],
                    tool=workload.profile.tool,
                )
                hook = Hooks(telemetry, profile)
            try:
                summary = run_sweep(cfg, folder, hook=hook)
            finally:
                telemetry.close()
            server.check_alive()
            if summary.status == "interrupted":
                raise KeyboardInterrupt
        gates.accuracy_tasks(spec, base_url, stage_dir, say)
        gates.parity_candidate(spec, base_url, stage_dir, say)


def run_parity(spec: PocSpec, stage_dir: Path, say: Say) -> None:
    """The baseline (the framework's own kernels) answers the parity prompts; compared with
    what the POC's configuration answered in the serving stage."""
    pristine, notes = _unpatched(spec, stage_dir)
    try:
        gates.run_parity_stage(
            spec, stage_dir, say, lambda variant, d: serve(variant, d, say, pristine), notes
        )
    except gates.GateError as exc:
        raise StageError(str(exc)) from None


def _unpatched(spec: PocSpec, stage_dir: Path) -> tuple[Path | None, list[str]]:
    """The overlay that runs the baseline without the POC's framework patches applied in
    the server's environment (:mod:`~pocforge.frameworks.patching.pristine`), and the note
    that says so; (None, a note) when there is nothing to take out or no way to."""
    framework = spec.serving.framework
    runtime = resolve(spec, "serving")
    if runtime.kind == "container":
        return None, [
            "the baseline ran in the POC's container image as the candidate did: framework "
            "patches applied on this machine are not in either"
        ]
    ctx = runtime_context(runtime, LaunchContext.local(workspace_root()))
    python = ctx.sglang_python if framework == "sglang" else ctx.python  # where it serves
    if framework not in FRAMEWORKS:
        return None, [f"the kit applies no framework patches to {framework}"]
    try:
        made = overlay(spec.name, framework, python, stage_dir / "_unpatched")
    except PatchError as exc:
        return None, [f"the baseline may run the POC's framework patches too: {exc}"]
    if made is None:
        return None, [f"no framework patches of {spec.name} are applied to {framework} here"]
    return made.folder, [made.note()]


def run_training_stage(
    spec: PocSpec, stage_dir: Path, say: Say, node_rank: int | None = None
) -> None:
    """The training benchmark here; ``node_rank``: this node's part of a multi-node run."""
    training = spec.training
    if training.framework == "megatron":
        layout = training.megatron or MegatronLayout()
        how = f"Megatron tp{layout.tp} pp{layout.pp}" + (
            ", from a checkpoint" if training.init else ""
        )
    else:
        how = f"DeepSpeed ZeRO-{training.zero_stage}"
    say(f"training: {how}, {training.steps} steps")
    ctx = LaunchContext.local(workspace_root(), port=free_port(), node_rank=node_rank)
    with training_telemetry(stage_dir, spec.cluster.gpus_per_node, say) as telemetry:
        summary = run_training(spec, stage_dir, ctx)
        telemetry.summary = summary
    if summary is None:  # a node other than the first: its ranks ran, rank 0 reports
        say(f"training: node {node_rank}'s ranks finished")
        return
    for warning in summary.warnings:
        say(f"training: warning: {warning}")
    atomic.write_text(
        stage_dir / "result.json", from_training_summary(summary).model_dump_json(indent=2)
    )
    say(
        f"training: {summary.tokens_per_s_per_gpu:,.0f} tokens/s/GPU, final loss {summary.final_loss:.3f}"
    )


def run_kernels(spec: PocSpec, stage_dir: Path, say: Say) -> None:
    """The kernel bench in its own process (it switches the Triton interpreter on for CPUs)."""
    ops = sorted({k.op for k in spec.kernels.ops})
    dtypes = sorted({d for k in spec.kernels.ops for d in k.dtypes if d in ("bfloat16", "float16")})
    say(f"kernels: {', '.join(ops)}")
    raw = stage_dir / "bench.json"
    argv = [
        sys.executable,
        "-m",
        "pocforge_kernels.bench",
        "--json",
        str(raw),
        "--dtype",
        (dtypes or ["bfloat16"])[0],
    ]
    for op in ops:
        argv += ["--op", op]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
    atomic.write_text(stage_dir / "bench.log", done.stdout + done.stderr)
    if not raw.is_file():
        raise StageError(
            f"the kernel benchmark wrote no results (exit {done.returncode}); see {stage_dir / 'bench.log'}"
        )
    result = from_kernel_bench(json.loads(raw.read_text()))
    atomic.write_text(stage_dir / "results.json", result.model_dump_json(indent=2))
    rows = result.rows
    bad = [f"{r.op} {r.shape}" for r in rows if not r.ok]
    say(
        f"kernels: {len(rows) - len(bad)}/{len(rows)} correct"
        + (f"; wrong: {', '.join(bad)}" if bad else "")
    )


STAGE_RUNNERS: dict[str, Callable[..., None]] = {
    "kernels": run_kernels,
    "serving": run_serving,
    "parity": run_parity,
    "training": run_training_stage,
}


def run_stage(name: str, spec: PocSpec, stage_dir: Path, say: Say, node_rank: int | None) -> None:
    """Stage ``name`` here; ``node_rank`` reaches training (a node's part of a multi-node run)."""
    if name == "training":
        run_training_stage(spec, stage_dir, say, node_rank)
    else:
        STAGE_RUNNERS[name](spec, stage_dir, say)
