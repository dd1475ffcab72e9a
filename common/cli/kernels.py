"""``pocforge bench kernels``: the kit's Triton kernels against their roofline (kernels/bench)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from pocforge.cli.common import fail
from pocforge.kernels import OPS


@click.command("kernels")
@click.option(
    "--op",
    "ops",
    multiple=True,
    type=click.Choice(sorted(OPS)),
    help="Op to run (repeatable; default: all).",
)
@click.option(
    "--dtype", type=click.Choice(["bfloat16", "float16"]), default="bfloat16", show_default=True
)
@click.option(
    "--device", help="torch device (default: cuda/hip when available, else cpu: correctness only)."
)
@click.option(
    "--json",
    "json_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the result document here.",
)
def kernels_cmd(
    ops: tuple[str, ...], dtype: str, device: str | None, json_out: Path | None
) -> None:
    """Time each kernel at model-derived shapes: GB/s, TFLOP/s, % of roofline, speedup over
    the torch reference (and vLLM's kernel where installed). On a CPU: correctness only."""
    try:
        import torch

        from pocforge.kernels.bench import print_report, run_benchmarks
    except ImportError as exc:
        fail(f"the kernel benchmark needs torch and triton: {exc}")
    result = run_benchmarks(list(ops) or None, getattr(torch, dtype), device)
    print_report(result)
    if json_out:
        json_out.write_text(json.dumps(result, indent=2) + "\n")
        click.echo(f"wrote {json_out}")
    sys.exit(0 if all(row.get("correct") for row in result["rows"]) else 1)


def register(main: click.Group) -> None:
    from pocforge.cli.bench import bench

    bench.add_command(kernels_cmd)
