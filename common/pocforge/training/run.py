"""Run a POC's training benchmark on this machine (one node) and read back its summary."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from pocforge import atomic
from pocforge.frameworks import ADAPTERS, LaunchContext, gpu_profiler
from pocforge.frameworks.base import prepare_model
from pocforge.frameworks.launch_plan import NodeLaunch
from pocforge.frameworks.node_launcher import in_start_order, nsys_reports_summed
from pocforge.frameworks.process import LaunchError, ManagedProcess
from pocforge.frameworks.startup import training_timeout_s
from pocforge.paths import extensions_dir
from pocforge.spec import PocSpec
from pocforge.training.launcher_report import parse_launcher_report
from pocforge.training.summary import TrainingSummary


def clear_stale_locks(folder: Path) -> list[Path]:
    """Remove ``lock`` files a killed C++ extension build left behind (later builds would
    wait on them forever). Only call when no build is running."""
    removed = []
    for lock in folder.glob("*/lock"):
        with contextlib.suppress(OSError):
            lock.unlink()
            removed.append(lock)
    return removed


def run_training(
    spec: PocSpec, out_dir: Path, ctx: LaunchContext, timeout_s: float | None = None
) -> TrainingSummary | None:
    """Train ``spec``'s model for its steps: this node's ranks (several nodes: each runs its
    own part, ``ctx.node_rank``); raise ``LaunchError`` with the log tail. Rank 0 (on the
    first node) writes the summary; the other nodes return None.

    The run is stopped after ``timeout_s`` (default: ``training.timeout_s``, else derived
    from the model's size and the steps, :func:`~pocforge.frameworks.startup.training_timeout_s`).
    """
    if spec.training is None:
        raise ValueError(f"{spec.name} has no training section")
    prepare_model(spec)
    framework = spec.training.framework
    if framework == "deepspeed":
        clear_stale_locks(Path(extensions_dir(ctx.python)))
    launches = ADAPTERS[framework].plan(spec, ctx, out_dir=out_dir)
    launches = gpu_profiler.under_profiler(spec, "training", launches, out_dir=out_dir)
    rank = ctx.node_rank if ctx.node_rank is not None else 0
    nodes = len({one.node_rank for one in launches})
    if nodes > 1 and ctx.node_rank is None:
        raise ValueError(
            f"{spec.name} trains on {nodes} nodes: run each node's part with --node-rank N"
        )
    *steps, launch = in_start_order([one for one in launches if one.node_rank == rank])
    # one deadline for the steps and the training, as a node's run_in_order has it
    deadline = time.monotonic() + (timeout_s or training_timeout_s(spec))
    for step in steps:  # a checkpoint's conversion: before the ranks, once
        run_step(step, out_dir, max(deadline - time.monotonic(), 1.0))
    log = out_dir / "train.log"
    process = ManagedProcess(launch, log, workdir=out_dir)
    process.start()
    interrupted = False
    try:
        code = process.wait(max(deadline - time.monotonic(), 1.0))
    except KeyboardInterrupt:
        interrupted, code = True, 130
    finally:
        process.stop()
    for problem in nsys_reports_summed(launch, out_dir):
        print(f"profile: no kernel table: {problem}", flush=True)
    summary_file = out_dir / "summary.json"
    if framework == "megatron":
        return _megatron_result(spec, out_dir, log, code, interrupted, process)
    if interrupted:
        raise KeyboardInterrupt
    if code == 0 and rank > 0:
        return None
    summary = (
        TrainingSummary.model_validate_json(summary_file.read_text())
        if summary_file.is_file()
        else None
    )
    return judged(summary, code, log, out_dir, spec.training.steps, process.log_tail)


def run_step(step: NodeLaunch, out_dir: Path, timeout_s: float) -> None:
    """A step before training (``step.role``: ``convert``) to completion, its log beside
    the training's; skipped when what it creates is there. Raises ``LaunchError`` with
    its log's tail when it fails; a Ctrl-C stops it and goes on up."""
    if step.done():
        print(f"{step.role}: {step.creates} is there; reused", flush=True)
        return
    process = ManagedProcess(step, out_dir / f"{step.role}.log", workdir=out_dir)
    process.start()
    try:
        code = process.wait(timeout_s)
    finally:
        process.stop()
    if code:
        raise LaunchError(
            f"training's {step.role} step exited with code {code} (log: {out_dir / f'{step.role}.log'})",
            code,
            process.log_tail(),
        )


def judged(
    summary: TrainingSummary | None,
    code: int,
    log: Path,
    out_dir: Path,
    steps: int,
    log_tail=lambda: "",
) -> TrainingSummary:
    """The training stage's judgement of how its launcher ended.

    Exit 0 with a summary: the summary. A complete summary but a rank that died on its way
    out (the launcher's exit code says failed): the summary, with a warning naming the rank
    and how it died. Anything else raises ``LaunchError``: the first rank that failed (the
    launcher's own report), and the steps done before it (kept in ``steps.jsonl``).
    """
    if code == 0 and summary is not None:
        return summary
    report = parse_launcher_report(log.read_text(errors="replace")) if log.is_file() else None
    if summary is not None and summary.status == "completed":
        cause = report.line() if report else f"the launcher exited with code {code}"
        summary.warnings.append(f"after the run had completed and its summary was written: {cause}")
        atomic.write_text(out_dir / "summary.json", summary.model_dump_json(indent=2))
        return summary
    done = _steps_done(out_dir / "steps.jsonl")
    cause = report.line() if report else f"training exited with code {code}"
    kept = f"{done} of {steps} steps done, kept in steps.jsonl" if done else "no step done"
    tail = _report_block(log) if report else log_tail()
    raise LaunchError(f"training failed: {cause}; {kept} (log: {log})", code, tail)


def _steps_done(path: Path) -> int:
    try:
        return sum(1 for line in path.read_text().splitlines() if line.strip())
    except OSError:
        return 0


def _report_block(log: Path) -> str:
    """The launcher's own failure report (not the launcher's traceback above it)."""
    text = log.read_text(errors="replace")
    return text[text.rfind("ChildFailedError") :].split("\n", 1)[-1].strip()


def _megatron_result(
    spec: PocSpec, out_dir: Path, log: Path, code: int | None, interrupted: bool, process
) -> TrainingSummary | None:
    """Megatron prints its iterations from the last rank: the node whose log has them
    writes ``summary.json`` (also after a Ctrl-C or a failure, marked so, with every
    iteration it logged); a node without them returns None when it exited cleanly."""
    from pocforge.training.megatron_summary import (
        megatron_summary,
        read_driver_facts,
        read_iterations,
    )

    text = log.read_text(errors="replace") if log.is_file() else ""
    parsed = read_iterations(text)
    if parsed is not None:
        status = "interrupted" if interrupted else "completed" if code == 0 else "failed"
        summary = megatron_summary(spec, parsed, read_driver_facts(out_dir), status)
        atomic.write_text(out_dir / "summary.json", summary.model_dump_json(indent=2))
        if interrupted:
            raise KeyboardInterrupt
        if code != 0:
            raise LaunchError(f"training exited with code {code}", code, process.log_tail())
        return summary
    if interrupted:
        raise KeyboardInterrupt
    if code != 0:
        raise LaunchError(f"training exited with code {code}", code, process.log_tail())
    return None
