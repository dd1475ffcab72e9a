"""Spec verbs: ``ls``, ``new``, ``validate``, ``show``, ``schema``."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import click
import yaml
from rich.console import Console
from rich.table import Table

from pocforge.cli.common import fail, pocs_or_paths
from pocforge.paths import pocs_dir, workspace_root
from pocforge.spec import SpecError, load_poc, load_spec, public_dump, resolve_spec_path
from pocforge.spec.base import NAME_PATTERN
from pocforge.spec.docs import spec_markdown
from pocforge.spec.schema import PocSpec
from pocforge.spec.training_rules import DEEPSPEED_ONLY

console = Console()
if not console.is_terminal:  # piped or captured: do not squeeze columns to 80
    console = Console(width=200)


@click.command("ls")
def ls_cmd() -> None:
    """List the POCs with customer, framework, GPUs and status of their newest run."""
    table = Table("POC", "customer", "serving", "training", "GPUs", "status", box=None)
    for folder in sorted(p for p in pocs_dir().iterdir() if (p / "poc.yaml").is_file()):
        if folder.name.startswith("_"):
            continue
        try:
            spec = load_spec(folder / "poc.yaml")
        except SpecError as exc:
            table.add_row(
                folder.name, "", "", "", "", f"[red]invalid ({len(exc.problems)} problems)[/]"
            )
            continue
        gpus = f"{spec.cluster.nodes}×{spec.cluster.gpus_per_node} {spec.cluster.gpu}"
        serving = spec.serving.framework if spec.serving else "-"
        training = spec.training.framework if spec.training else "-"
        table.add_row(spec.name, spec.poc.customer, serving, training, gpus, _run_status(spec.name))
    console.print(table)


def _run_status(name: str) -> str:
    """Status of the POC's newest run, from the run store."""
    from pocforge.results.store import Run, RunError, RunStore

    runs = RunStore().runs(name)
    if not runs:
        return "no runs"
    try:
        return f"{runs[-1].name}: {Run.open(runs[-1]).manifest.status}"
    except RunError:
        return f"{runs[-1].name}: unreadable manifest"


@click.command("new")
@click.argument("name")
@click.option(
    "--from",
    "base",
    metavar="POC",
    help="Derive from this POC (an include: plus the keys that differ).",
)
@click.option(
    "--model",
    metavar="HF_ID",
    help="The model to serve or train (model.id); the shipped catalog gives its facts.",
)
def new_cmd(name: str, base: str | None, model: str | None) -> None:
    """Scaffold pocs/NAME from pocs/_template, or derive it from another POC. Where a score
    is published for the model, an accuracy criterion is proposed (commented in poc.yaml)."""
    if not re.match(NAME_PATTERN, name):
        fail(
            f"POC name {name!r} must be lowercase letters, digits, '.', '_' or '-' (e.g. llama-3.1-70b-bf16-mi300x-vllm)"
        )
    target = pocs_dir() / name
    if target.exists():
        fail(f"{target} already exists; pick another name or edit it")
    if model is not None and not re.fullmatch(r"[\w.-]+(/[\w.-]+)?", model):
        fail(f"--model {model!r} is not a Hugging Face id (e.g. meta-llama/Llama-3.1-8B-Instruct)")
    spec_file = target / "poc.yaml"
    if base is None:
        shutil.copytree(pocs_dir() / "_template", target)
        text = re.sub(r"(?m)^(  name:) .*$", rf"\1 {name}", spec_file.read_text(), count=1)
        if model is not None:
            text = _with_model(text, model)
        spec_file.write_text(text)
    else:
        try:
            load_poc(base)
        except SpecError as exc:
            fail(f"cannot derive from {base!r}:\n{exc}")
        target.mkdir(parents=True)
        spec_file.write_text(
            f"# Derived from {base}: only the keys that differ are written here.\n"
            f"include: ../{base}/poc.yaml\n\npoc:\n  name: {name}\n"
            + (f"\nmodel:\n  id: {model}\n" if model is not None else "")
        )
        (target / "README.md").write_text(
            f"# {name}\n\nA variant of [{base}](../{base}/README.md). Say what differs and why.\n"
        )
    try:
        spec = load_poc(name)
    except SpecError as exc:
        fail(f"created {target}, but it does not validate:\n{exc}")
    click.echo(
        f"created {target.relative_to(pocs_dir().parent)}/ — edit poc.yaml, then: pocforge validate {name}"
    )
    from pocforge.quality.scores import commented_block, proposals

    if found := proposals(spec.model.id):
        with spec_file.open("a") as out:
            out.write(commented_block(found))
        for p in found:
            click.echo(
                f"published {p.score.task} score for {spec.model.id}: {p.key} "
                f"{p.score.values[p.key]} ({p.score.source}); proposed criterion: {p.criterion} "
                "(commented in poc.yaml: the task needs its data in the POC folder)"
            )


def _with_model(text: str, model: str) -> str:
    """The template's text with ``model.id`` set, its example facts dropped (the catalog
    has the facts of the models it knows; ``validate`` names what else it needs)."""
    text = re.sub(r"(?m)^(  id:) .*$", rf"\1 {model}", text, count=1)
    return re.sub(r"(?m)^  # The model's config.json.*\n  facts: .*\n", "", text, count=1)


@click.command("validate")
@click.argument("targets", nargs=-1)
@click.option(
    "--framework-check/--no-framework-check",
    default=True,
    show_default=True,
    help="Also check every launch with the installed framework's own parser (vLLM, SGLang, TensorRT-LLM, DeepSpeed).",
)
def validate_cmd(targets: tuple[str, ...], framework_check: bool) -> None:
    """Check POC specs (names, folders or files; default: every POC). Exit 2 on any problem."""
    bad = 0
    specs = []
    for target in targets or pocs_or_paths(()):
        try:
            specs.append(load_spec(resolve_spec_path(target)))
        except SpecError as exc:
            bad += 1
            for problem in exc.problems:
                click.echo(str(problem), err=True)
    from pocforge.frameworks import LaunchContext
    from pocforge.frameworks.patching import spec_problems as patch_problems
    from pocforge.runtimes import RuntimeSpecError, plan_nodes
    from pocforge.runtimes.versions import version_problems

    problems: dict[str, list[str]] = {}
    for spec in specs:
        if found := patch_problems(spec):
            problems[spec.name] = [f"patches: {p}" for p in found]
        try:  # every node's launch in its runtime (container image, venv) can be planned
            plan_nodes(spec, LaunchContext.local(workspace_root()))
        except RuntimeSpecError as exc:
            problems.setdefault(spec.name, []).append(str(exc))
        wrong, unchecked = version_problems(spec)  # the version declared is the one run
        problems.setdefault(spec.name, []).extend(wrong)
        for note in unchecked:
            click.echo(f"note: {note}", err=True)
    if framework_check and specs:
        from pocforge.frameworks.checks import framework_problems

        checked, notes = framework_problems(specs, LaunchContext.local(workspace_root()))
        for name, found in checked.items():
            problems.setdefault(name, []).extend(found)
        for note in notes:
            click.echo(f"note: {note}", err=True)
    for spec in specs:
        if problems.get(spec.name):
            bad += 1
            for problem in problems[spec.name]:
                click.echo(f"{spec.source_file}: {problem}", err=True)
        else:
            click.echo(f"ok  {spec.name}  ({_summary(spec)})")
    if bad:
        click.echo(f"{bad} spec(s) with problems", err=True)
        sys.exit(2)


def _summary(spec: PocSpec) -> str:
    parts = [f"{spec.cluster.nodes}×{spec.cluster.gpus_per_node} {spec.cluster.gpu}"]
    if spec.serving and spec.serving.disaggregation:
        pools = spec.serving.disaggregation
        layouts = [
            f"{role} {pool.instances}×tp{pool.tp} dp{pool.dp} ep{pool.ep}"
            for role, pool in (("prefill", pools.prefill), ("decode", pools.decode))
        ]
        parts.append(
            f"{spec.serving.framework} disaggregated: {', '.join(layouts)}, {len(spec.serving.workloads)} workloads"
        )
    elif spec.serving:
        par = spec.serving.parallelism
        parts.append(
            f"{spec.serving.framework} tp{par.tp} pp{par.pp} dp{par.dp} ep{par.ep}, {len(spec.serving.workloads)} workloads"
        )
    if spec.training and spec.training.framework == "megatron":
        from pocforge.frameworks.megatron import data_parallel, layout_of

        layout = layout_of(spec)
        parts.append(
            f"megatron tp{layout.tp} pp{layout.pp} cp{layout.cp} dp{data_parallel(spec)} ep{layout.ep}"
        )
    elif spec.training:
        parts.append(f"{spec.training.framework} ZeRO-{spec.training.zero_stage}")
    parts.append(f"{len(spec.acceptance.criteria)} criteria")
    return "; ".join(parts)


@click.command("show")
@click.argument("target")
@click.option("--json", "as_json", is_flag=True, help="JSON instead of YAML.")
def show_cmd(target: str, as_json: bool) -> None:
    """Print the resolved spec (includes merged, defaults filled, secrets masked; a
    training section shows only its framework's fields)."""
    try:
        spec = load_poc(target)
    except SpecError as exc:
        fail(str(exc))
    data = public_dump(spec)
    training = data.get("training")
    if training:  # only the fields of the framework that trains (the rules refuse the others)
        unused = DEEPSPEED_ONLY if training["framework"] != "deepspeed" else ("megatron",)
        for name in unused:
            training.pop(name, None)
    if as_json:
        click.echo(json.dumps(data, indent=2))
    else:
        click.echo(f"# {spec.source_file}  (sha256 {spec.spec_hash[:12]})")
        click.echo(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), nl=False)


@click.command("schema")
@click.option(
    "--markdown", is_flag=True, help="The field reference (pocs/SPEC.md) instead of JSON Schema."
)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Write to this file.")
def schema_cmd(markdown: bool, out: Path | None) -> None:
    """Print the JSON Schema of poc.yaml (or its Markdown field reference)."""
    text = spec_markdown() if markdown else json.dumps(PocSpec.model_json_schema(), indent=2) + "\n"
    if out:
        out.write_text(text)
        click.echo(f"wrote {out}")
    else:
        click.echo(text, nl=False)


def register(main: click.Group) -> None:
    for command in (ls_cmd, new_cmd, validate_cmd, show_cmd, schema_cmd):
        main.add_command(command)
