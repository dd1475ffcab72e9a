"""Result verbs: ``results verify``, ``results ls``, ``results schema``, ``import``."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from pocforge.cli.common import fail


def _store(root: str | None):
    from pocforge.results.store import RunStore

    return RunStore(root)


@click.group("results")
def results_group() -> None:
    """Run folders under results/: list, verify, export the schema."""


@results_group.command("verify")
@click.argument("run")
@click.option(
    "--root", type=click.Path(file_okay=False), help="Results folder (default: results/)."
)
def verify_cmd(run: str, root: str | None) -> None:
    """Check every file of RUN (<poc>, <poc>/<run-id> or a folder) against its manifest.

    Exit 0 when nothing is missing, altered or extra; 1 otherwise; 2 on a bad reference.
    """
    from pocforge.results.store import RunError
    from pocforge.results.verify import verify

    try:
        report = verify(_store(root).resolve(run))
    except RunError as exc:
        fail(str(exc))
    for line in report.lines():
        click.echo(line)
    state = "ok" if report.ok else "FAILED"
    click.echo(
        f"{report.run}: {state} ({report.files} files in the manifest, status {report.status})"
    )
    if report.status == "running" and report.incomplete:
        poc, run_id = report.run.split("/", 1) if "/" in report.run else ("<poc>", report.run)
        click.echo(f"cut off: finish it with `pocforge run <pocs/{poc}> --resume {run_id}`")
    raise SystemExit(0 if report.ok else 1)


@results_group.command("ls")
@click.argument("poc")
@click.option(
    "--root", type=click.Path(file_okay=False), help="Results folder (default: results/)."
)
def ls_cmd(poc: str, root: str | None) -> None:
    """List the runs of POC, oldest first, with status and stages."""
    from pocforge.results.store import Run, RunError

    runs = _store(root).runs(poc)
    if not runs:
        fail(f"POC {poc!r} has no runs")
    for path in runs:
        try:
            m = Run.open(path).manifest
        except RunError as exc:
            click.echo(f"{path.name}  unreadable: {exc}")
            continue
        stages = ", ".join(f"{k}:{v.status}" for k, v in m.stages.items()) or "-"
        click.echo(f"{m.run_id}  {m.status:<11} {stages}")


@results_group.command("schema")
@click.option(
    "--out", type=click.Path(file_okay=False), default="results/schema", show_default=True
)
def schema_cmd(out: str) -> None:
    """Write the JSON Schema of every result file kind."""
    from pocforge.results.schema import export_json_schemas

    for path in export_json_schemas(Path(out)):
        click.echo(str(path))


@click.command("import")
@click.argument("files", nargs=-1, required=True, type=click.Path())
@click.option(
    "--format",
    "fmt",
    required=True,
    # = pocforge.results.importers.FORMATS (a test keeps them equal; importing it here would
    # load the result store on every CLI start)
    type=click.Choice(
        [
            "vllm",
            "sglang",
            "aiperf",
            "guidellm",
            "mad",
            "nccl-tests",
            "rccl-tests",
            "deepep",
            "mori",
            "trtllm-bench",
            "mlperf",
            "published",
            "megatron-log",
            "dgxc",
            "kernels",
        ]
    ),
    help="Tool that produced FILES.",
)
@click.option("--as", "as_ref", help="POC/RUN to store it as (default: imported/<new id>).")
@click.option(
    "--workload", default="imported", show_default=True, help="Workload name of serving results."
)
@click.option(
    "--gpus",
    type=click.IntRange(min=1),
    help="GPUs that served or trained it (per-GPU numbers; a training log's world size).",
)
@click.option("--gpu", help="GPU type (catalog name, e.g. MI300X, H100): MFU of training logs.")
@click.option(
    "--dtype",
    type=click.Choice(["bfloat16", "float16", "float32", "fp8"]),
    help="Training dtype, when the log does not say (for MFU).",
)
@click.option(
    "--seq-len",
    type=click.IntRange(min=1),
    help="Training sequence length, when the log does not say (for tokens/s/GPU).",
)
@click.option(
    "--warmup",
    type=click.IntRange(min=0),
    help="Training iterations <= N left out of the rates (default: the format's, see its docs).",
)
@click.option(
    "--root", type=click.Path(file_okay=False), help="Results folder (default: results/)."
)
@click.option(
    "--check",
    is_flag=True,
    help="Say what each file would become (tool, version, points or runs, caveats); write "
    "no run. Exits 1 when a file is refused.",
)
def import_cmd(
    files: tuple[str, ...],
    fmt: str,
    as_ref: str | None,
    workload: str,
    gpus: int | None,
    gpu: str | None,
    dtype: str | None,
    seq_len: int | None,
    warmup: int | None,
    root: str | None,
    check: bool,
) -> None:
    """Normalise other tools' result FILES into a run (one file per sweep point; one log
    for a training format: megatron-log, dgxc)."""
    from pocforge.results.base import SchemaError
    from pocforge.results.importers import ResultImportError, import_files
    from pocforge.results.store import RunError

    if as_ref and (as_ref.count("/") > 1 or not as_ref.strip("/")):
        fail(f"--as {as_ref!r}: write it as POC or POC/RUN")
    training = {"gpu": gpu, "dtype": dtype, "seq_len": seq_len, "warmup": warmup}
    if check:
        _check_files(files, fmt, workload, gpus, training)
        return
    try:
        run = import_files(
            [Path(f) for f in files],
            fmt,
            store=_store(root),
            as_ref=as_ref,
            workload=workload,
            gpus=gpus,
            **training,
        )
    except (ResultImportError, RunError, SchemaError) as exc:
        fail(str(exc))
    click.echo(f"imported {len(files)} file(s) as {run.id} -> {run.path}")


def _check_files(
    files: tuple[str, ...], fmt: str, workload: str, gpus: int | None, training: dict
) -> None:
    """``import --check``: each file parsed on its own and described; exit 1 if one is
    refused (each refusal said, the others still described)."""
    from pocforge.results.importers import ResultImportError, parse
    from pocforge.results.importers.describe import describe

    refused = 0
    for name in files:
        try:
            imported = parse([Path(name)], fmt, workload, gpus, **training)
        except ResultImportError as exc:
            refused += 1
            click.echo(f"{name}: refused: {exc}")
            continue
        click.echo(f"{name}:")
        for line in describe(imported):
            click.echo(f"  {line}")
    if refused:
        sys.exit(1)


def register(main: click.Group) -> None:
    main.add_command(results_group)
    main.add_command(import_cmd)
