"""``pocforge bench train POC``: the DeepSpeed training benchmark of a POC, on this machine."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from pocforge.cli.common import fail
from pocforge.frameworks import LaunchContext
from pocforge.frameworks.process import LaunchError
from pocforge.spec import SpecError, load_poc, repo_root
from pocforge.training.run import run_training
from pocforge.training.summary import TrainingSummary


@click.command("train")
@click.argument("poc")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Output folder (default: results/<poc>/train-<time>).",
)
@click.option(
    "--timeout",
    "timeout_s",
    type=float,
    default=1800,
    show_default=True,
    help="Seconds before the run is stopped.",
)
def train_cmd(poc: str, out: Path | None, timeout_s: float) -> None:
    """Train POC's model for its steps with DeepSpeed; print tokens/s/GPU, MFU and the loss curve."""
    try:
        spec = load_poc(poc)
    except SpecError as exc:
        fail(str(exc))
    if spec.training is None:
        fail(f"{spec.name} has no training section")
    if spec.cluster.nodes > 1:
        fail(
            f"{spec.name} trains on {spec.cluster.nodes} nodes: run it with `pocforge cluster` (playbooks/train.yml)"
        )
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = out or repo_root() / "results" / spec.name / f"train-{stamp}"
    click.echo(
        f"training {spec.name}: ZeRO-{spec.training.zero_stage}, {spec.training.steps} steps; log: {out / 'train.log'}"
    )
    try:
        summary = run_training(spec, out, LaunchContext.local(repo_root()), timeout_s)
    except LaunchError as exc:
        fail(str(exc), code=1)
    Console().print(summary_table(summary))
    click.echo(f"summary: {out / 'summary.json'}")


def summary_table(summary: TrainingSummary) -> Table:
    def num(value: float | None, fmt: str) -> str:
        return "n/a" if value is None else format(value, fmt)

    table = Table(title=f"training benchmark ({summary.status})", box=None)
    table.add_column("metric")
    table.add_column("value", justify="right")
    rows = [
        (
            "world size × micro-batch × accum × seq",
            f"{summary.world_size} × {summary.micro_batch} × {summary.grad_accum} × {summary.seq_len}",
        ),
        ("tokens/s/GPU", num(summary.tokens_per_s_per_gpu, ",.0f")),
        ("TFLOP/s per GPU", num(summary.tflops_per_gpu, ".4f")),
        (
            "MFU",
            "n/a (no peak for this device/dtype)" if summary.mfu is None else f"{summary.mfu:.1%}",
        ),
        (f"peak memory ({summary.peak_memory_kind})", f"{num(summary.peak_memory_gb, '.2f')} GB"),
        (
            "loss first → last",
            f"{summary.loss_curve[0].loss:.3f} → {summary.loss_curve[-1].loss:.3f}"
            if summary.loss_curve
            else "n/a",
        ),
    ]
    for name, value in rows:
        table.add_row(name, value)
    return table


def register(main: click.Group) -> None:
    from pocforge.cli.bench import bench

    bench.add_command(train_cmd)
