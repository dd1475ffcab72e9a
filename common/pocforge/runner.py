"""``pocforge run POC``: the stages of one POC on this machine, as one resumable run.

Stages, each a folder of the run (``results/<poc>/<run-id>/<stage>/``) marked running →
complete | failed | interrupted in the manifest:

- ``serving``: build the tiny model if the spec asks, start the framework through its
  adapter, sweep every workload (``serving/<workload>/summary.json`` + request records),
  stop the server;
- ``kernels``: the kit's kernel benchmark for ``kernels.ops`` (``kernels/bench.json`` as the
  bench wrote it, ``kernels/results.json`` for the dashboard; on a CPU: correctness only);
- ``training``: the DeepSpeed benchmark (``training/summary.json``, ``result.json``);
- ``report``: the dashboard (``dashboard.html``), judged against the acceptance criteria.

``--resume RUN`` skips the stages already complete. Ctrl-C (or SIGTERM) stops the stage in
progress; everything gathered so far stays in the run and the report can still be built.
Multi-node POCs run their stages through the cluster playbooks, not here.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from pocforge.bench.datasets import DatasetConfig
from pocforge.bench.sweep import SweepConfig, run_sweep
from pocforge.frameworks import ADAPTERS, LaunchContext
from pocforge.frameworks.base import model_path, prepare_model
from pocforge.frameworks.process import ManagedProcess, free_port
from pocforge.paths import workspace_root
from pocforge.results.schema import KernelResults, KernelRow, TrainingResult, TrainingStep
from pocforge.results.secrets import Redactor
from pocforge.results.store import Run, RunStore
from pocforge.spec import PocSpec
from pocforge.spec.schema import Lengths, Workload
from pocforge.training.run import run_training

STAGES = ("kernels", "serving", "training", "report")
Say = Callable[[str], None]


class RunnerError(RuntimeError):
    """A POC this runner cannot run here (one clear line)."""


def lengths(value: Lengths) -> str:
    """A spec length distribution as the load generator's length spec."""
    if value.distribution == "fixed":
        return str(value.mean)
    if value.distribution == "uniform":
        return f"uniform:{value.min}:{value.max}"
    return f"normal:{value.mean}:{value.std}:{value.min or 1}:{value.max or 10**9}"


def sweep_config(spec: PocSpec, workload: Workload, base_url: str) -> SweepConfig:
    """The load generator's configuration for one workload of the spec."""
    data, load = workload.dataset, workload.load
    folder = spec.source_dir or Path.cwd()
    if data.kind == "random":
        dataset = DatasetConfig(
            kind="random", isl=lengths(data.isl), osl=lengths(data.osl), seed=workload.seed
        )
    elif data.kind == "sharegpt":
        osl = lengths(data.osl) if data.osl else None
        dataset = DatasetConfig(
            kind="sharegpt", path=str(folder / data.path), osl=osl, seed=workload.seed
        )
    elif data.kind == "shared_prefix":
        dataset = DatasetConfig(
            kind="shared-prefix",
            isl=lengths(data.suffix_len),
            osl=lengths(data.osl),
            groups=data.groups,
            prefix_len=data.prefix_len,
            seed=workload.seed,
        )
    else:
        dataset = DatasetConfig(kind="trace", path=str(folder / data.path), seed=workload.seed)
    if data.kind == "trace":
        mode, values = "trace", [1.0 / data.time_scale]
    elif load.concurrency is not None:
        mode, values = "concurrency", [float(c) for c in load.concurrency]
    else:
        mode, values = "rate", list(load.request_rate)
    tokenizer = model_path(spec)
    return SweepConfig(
        base_url=base_url,
        model=spec.model.served_name or spec.model.id,
        api=workload.api,
        tokenizer=tokenizer if (Path(tokenizer) / "tokenizer.json").is_file() else None,
        dataset=dataset,
        mode=mode,
        values=values,
        num_prompts=workload.num_prompts,
        duration_s=workload.duration_s,
        repeats=workload.repeats,
        warmup=workload.warmup,
        burstiness=load.burstiness if load.arrival == "gamma" else 1.0,
        max_concurrency=load.max_concurrency,
        slos=[f"{s.metric}:p{s.percentile:g}:{s.max_ms:g}" for s in workload.slos],
        ignore_eos=workload.ignore_eos,
        gpus=spec.cluster.total_gpus,
        seed=workload.seed,
    )


def run_serving(spec: PocSpec, stage_dir: Path, say: Say) -> None:
    serving = spec.serving
    prepare_model(spec)
    ctx = LaunchContext.local(workspace_root(), host_override="127.0.0.1", port=free_port())
    (launch,) = ADAPTERS[serving.framework].plan(spec, ctx)
    server = ManagedProcess(launch, stage_dir / "server.log").start()
    try:
        say(
            f"serving: starting {serving.framework} (pid {server.pid}), log {stage_dir / 'server.log'}"
        )
        waited = server.wait_healthy(timeout_s=900)
        base_url = launch.health_url.rsplit("/", 1)[0]
        say(f"serving: healthy after {waited:.0f} s at {base_url}")
        for workload in serving.workloads:
            say(f"serving: workload {workload.name}")
            summary = run_sweep(sweep_config(spec, workload, base_url), stage_dir / workload.name)
            server.check_alive()
            if summary.status == "interrupted":
                raise KeyboardInterrupt
    finally:
        server.stop()


def run_training_stage(spec: PocSpec, stage_dir: Path, say: Say) -> None:
    say(f"training: DeepSpeed ZeRO-{spec.training.zero_stage}, {spec.training.steps} steps")
    summary = run_training(spec, stage_dir, LaunchContext.local(workspace_root(), port=free_port()))
    result = TrainingResult(
        framework=summary.framework,
        world_size=summary.world_size,
        gpu=summary.device,
        dtype=summary.dtype,
        warmup_steps=summary.warmup_steps,
        steps=[
            TrainingStep(
                step=s.step, loss=s.loss, step_time_s=s.seconds, tokens=summary.tokens_per_step
            )
            for s in summary.loss_curve
        ],
        tokens_per_s_per_gpu=summary.tokens_per_s_per_gpu,
        tflops_per_gpu=summary.tflops_per_gpu,
        mfu=summary.mfu,
        peak_memory_gb=summary.peak_memory_gb,
        final_loss=summary.final_loss,
    )
    (stage_dir / "result.json").write_text(result.model_dump_json(indent=2))
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
    (stage_dir / "bench.log").write_text(done.stdout + done.stderr)
    if not raw.is_file():
        raise RunnerError(
            f"the kernel benchmark wrote no results (exit {done.returncode}); see {stage_dir / 'bench.log'}"
        )
    bench = json.loads(raw.read_text())
    meta = bench["metadata"]
    rows = [
        KernelRow(
            op=row["op"],
            shape=_shape(row.get("shape")),
            dtype=meta["dtype"],
            time_us=row["median_ms"] * 1000 if "median_ms" in row else None,
            reference_time_us=row["median_ms"] * row["vs_torch"] * 1000
            if "vs_torch" in row
            else None,
            bound=row.get("bound"),
            pct_roofline=row.get("roofline_pct"),
            speedup_vs_reference=row.get("vs_torch"),
            speedup_vs_peers={
                name: peer["speedup"]
                for name, peer in row.get("peers", {}).items()
                if "speedup" in peer
            },
            max_rel_error=row.get("rel_error"),
            ok=bool(row.get("correct")),
        )
        for row in bench["rows"]
    ]
    result = KernelResults(
        gpu=meta.get("catalog_entry"), arch=meta.get("arch"), timed=bench["timed"], rows=rows
    )
    (stage_dir / "results.json").write_text(result.model_dump_json(indent=2))
    bad = [f"{r.op} {r.shape}" for r in rows if not r.ok]
    say(
        f"kernels: {len(rows) - len(bad)}/{len(rows)} correct"
        + (f"; wrong: {', '.join(bad)}" if bad else "")
    )


def _shape(text: str | dict | None) -> dict[str, int]:
    """The bench's ``"T=3 H=128"`` as ``{"T": 3, "H": 128}``."""
    if isinstance(text, dict) or not text:
        return dict(text or {})
    return {key: int(value) for key, _, value in (part.partition("=") for part in text.split())}


def run_poc(
    spec: PocSpec, *, resume: str | None = None, only: list[str] | None = None, say: Say = print
) -> Run:
    """Run (or resume) ``spec``'s stages; returns the run. Raises ``RunnerError`` up front."""
    if spec.cluster.nodes > 1 and (only or list(STAGES)) != ["training"]:
        # Training alone may start here: node 0 runs DeepSpeed's launcher, which starts the
        # ranks of the other nodes itself (that is what playbooks/train.yml does).
        raise RunnerError(
            f"{spec.name} spans {spec.cluster.nodes} nodes: run it with `pocforge cluster` and the playbooks"
        )
    if spec.cluster.gpu != "cpu":
        say(
            f"note: {spec.name} is sized for {spec.cluster.gpu}; running it on this machine as one node"
        )
    spec.require_secrets()
    store = RunStore()
    if resume:
        run = Run.open(store.resolve(f"{spec.name}/{resume}"))
        run.redactor = Redactor.for_spec(spec)
        run.resume()
    else:
        run = store.create(spec)
    wanted = [s for s in STAGES if (only is None or s in only)]
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        for name in wanted:
            done = run.manifest.stages.get(name)
            if done is not None and done.status == "complete":
                say(f"{name}: complete in {run.path.name}, skipped")
                continue
            if getattr(spec, name, None) is None and name != "report":
                continue  # the spec has no such section
            if name == "report":
                continue  # rendered below, once the run's status is final
            if done is not None and (moved := run.retire_stage(name)):
                say(f"{name}: the unfinished attempt is kept as {moved}; running it again")
            with run.stage(name) as stage:
                STAGE_RUNNERS[name](spec, stage.dir, say)
        run.finish()
        if "report" in wanted:
            from pocforge.report.render import render

            say(f"report: {render(run.path)}")
    except KeyboardInterrupt:
        run.finish("interrupted")
        say(
            f"interrupted: everything gathered so far is in {run.path}; resume with --resume {run.path.name}"
        )
        raise
    except BaseException:
        run.finish("failed")
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
    return run


STAGE_RUNNERS: dict[str, Callable[[PocSpec, Path, Say], None]] = {
    "kernels": run_kernels,
    "serving": run_serving,
    "training": run_training_stage,
}


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
