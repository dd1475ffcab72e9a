"""``pocforge bench kernels`` (time the kit's Triton kernels against their roofline) and
``pocforge kernels compile`` (compile them for real GPU targets, no GPU needed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click

from pocforge.cli.bench import OneLineGroup
from pocforge.cli.common import fail
from pocforge.spec.kernels_schema import KERNEL_OPS


@click.command("kernels")
@click.option(
    "--op",
    "ops",
    multiple=True,
    type=click.Choice(sorted(KERNEL_OPS)),  # the bench's ops (tests/kernels/test_op_registry.py)
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

        from pocforge_kernels.bench import print_report, run_benchmarks
    except ImportError as exc:
        fail(f"the kernel benchmark needs torch and triton: {exc}")
    result = run_benchmarks(list(ops) or None, getattr(torch, dtype), device)
    print_report(result)
    if json_out:
        json_out.write_text(json.dumps(result, indent=2) + "\n")
        click.echo(f"wrote {json_out}")
    sys.exit(0 if all(row.get("correct") for row in result["rows"]) else 1)


# pocforge_kernels.compile_check.targets.TARGETS, written out so that --help imports no
# triton (tests/kernels/test_compile_check.py keeps the two equal).
ARCHS = ["gfx942", "gfx950", "sm90", "sm100"]


@click.group("kernels", cls=OneLineGroup)
def kernels_group() -> None:
    """The kit's Triton kernel library (timing lives in `pocforge bench kernels`)."""


@kernels_group.command("compile")
@click.option(
    "--arch",
    "archs",
    multiple=True,
    type=click.Choice(ARCHS),
    help="Target architecture (repeatable; default: all).",
)
@click.option(
    "--op",
    "ops",
    multiple=True,
    type=click.Choice(sorted(KERNEL_OPS)),
    help="Op to compile (repeatable; default: all).",
)
@click.option(
    "--dtype", type=click.Choice(["bfloat16", "float16"]), default="bfloat16", show_default=True
)
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    help="Targets compiled at once, one process each (default: one per core).",
)
@click.option("--all", "every_variant", is_flag=True, help="Print every compiled variant.")
@click.option("--markdown", is_flag=True, help="Print the per-kernel summary as a Markdown table.")
@click.option(
    "--json",
    "json_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the result document here.",
)
def compile_cmd(
    archs: tuple[str, ...],
    ops: tuple[str, ...],
    dtype: str,
    jobs: int | None,
    every_variant: bool,
    markdown: bool,
    json_out: Path | None,
) -> None:
    """Compile every kernel launch for MI300X/MI325X (gfx942), MI355X (gfx950), H100/H200 (sm90)
    and B200 (sm100) at the benchmark shapes and every shipped config, with Triton's own
    compiler and no GPU: fails on a compile error or shared memory over the target's limit,
    reports registers, spills and occupancy. Exit 1 when anything fails."""
    import importlib.util

    missing = [m for m in ("torch", "triton") if importlib.util.find_spec(m) is None]
    if missing:
        fail(f"the compile check needs {' and '.join(missing)}: run `make setup`")
    argv = [sys.executable, "-m", "pocforge_kernels.compile_check"]
    argv += [f"--arch={a}" for a in archs] + [f"--op={o}" for o in ops] + [f"--dtype={dtype}"]
    argv += [f"--jobs={jobs}"] if jobs else []
    argv += ["--all"] if every_variant else []
    argv += ["--markdown"] if markdown else []
    argv += [f"--json={json_out}"] if json_out else []
    # Its own process: the check stops Triton's launch path after the compiler, and the
    # interpreter (TRITON_INTERPRET) would replace the compiler altogether.
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    code = subprocess.run(argv, env=env, check=False).returncode
    if json_out and code in (0, 1):
        click.echo(f"wrote {json_out}")
    sys.exit(code)


def register(main: click.Group) -> None:
    from pocforge.cli.bench import bench

    bench.add_command(kernels_cmd)
    main.add_command(kernels_group)
