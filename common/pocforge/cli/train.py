"""``pocforge bench train POC``: the DeepSpeed training benchmark of a POC, on this machine."""

from __future__ import annotations

import sys

import click
from rich.console import Console
from rich.table import Table

from pocforge.cli.common import fail
from pocforge.frameworks.process import LaunchError
from pocforge.spec import SpecError, load_poc
from pocforge.training.summary import TrainingSummary


@click.command("train")
@click.argument("poc")
@click.option(
    "--node-rank",
    type=int,
    help="Run this node's ranks of a multi-node POC (train.yml starts every node with its rank).",
)
def train_cmd(poc: str, node_rank: int | None) -> None:
    """Train POC's model for its steps with DeepSpeed as a run of its own (results/<poc>/<run>/training/);
    print tokens/s/GPU, TFLOP/s, MFU, peak memory and the loss."""
    from pocforge.runner import RunnerError, run_poc

    try:
        spec = load_poc(poc)
    except SpecError as exc:
        fail(str(exc))
    if spec.training is None:
        fail(f"{spec.name} has no training section")
    try:
        run = run_poc(spec, only=["training"], here=True, node_rank=node_rank, say=click.echo)
    except (RunnerError, SpecError) as exc:
        fail(str(exc))
    except LaunchError as exc:
        fail(str(exc), code=1)
    except KeyboardInterrupt:
        sys.exit(130)
    summary_file = run.path / "training" / "summary.json"
    if not summary_file.is_file():  # another node's part: the first node reports
        click.echo(f"run: {run.path}")
        return
    summary = TrainingSummary.model_validate_json(summary_file.read_text())
    Console().print(summary_table(summary))
    click.echo(f"run: {run.path}")


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
