"""Cluster verbs: ``pocforge cluster up|check|collectives|serve|train|down POC [--inventory]``.

Each verb is one stage of ``pocforge run`` on the POC's nodes (the same code path), into a
new run or, with ``--run-id``, into that run (created when new). ``serve`` and ``train``
deploy, benchmark, then collect.yml and teardown.yml (always); ``down`` is teardown.yml.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from pocforge.cli.common import over_ssh_only

VERBS = {
    "up": "bringup.yml",
    "check": "preflight.yml",
    "collectives": "collectives.yml",
    "serve": "serve.yml",
    "train": "train.yml",
    "down": "teardown.yml",
}


def _table(result) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    checks = sorted({c for h in result.hosts.values() for c in h.checks})
    table = Table(title=f"{result.playbook}: per host x per check")
    table.add_column("check")
    for name in result.hosts:
        table.add_column(f"{name} ({result.hosts[name].status})")
    marks = {"pass": "[green]pass[/]", "fail": "[red]FAIL[/]", "skip": "[yellow]skip[/]"}
    for check in checks:
        row = [check]
        for host in result.hosts.values():
            rec = host.checks.get(check)
            row.append("-" if rec is None else marks.get(rec.status, rec.status))
        table.add_row(*row)
    console.print(table)
    for rec in result.failures():
        console.print(f"[red]FAIL[/] {rec.host}: {rec.message}")
    for rec in result.skipped():
        console.print(f"[yellow]skip[/] {rec.host}: {rec.message}")


def _progress():
    """A live per-host view: the task each host is on and its counts."""
    from rich.live import Live
    from rich.table import Table

    live = Live(refresh_per_second=4, transient=True)

    def redraw(result) -> None:
        table = Table(title=result.playbook)
        for col in ("host", "status", "ok", "changed", "failed", "task"):
            table.add_column(col)
        for host in result.hosts.values():
            table.add_row(
                host.host,
                host.status,
                str(host.ok),
                str(host.changed),
                str(host.failed),
                host.task[:60],
            )
        live.update(table)

    return live, redraw


# verb -> the runner's stage it runs ("down" is the teardown playbook on its own).
STAGE_OF = {
    "up": "bringup",
    "check": "preflight",
    "collectives": "collectives",
    "serve": "serving",
    "train": "training",
}


def _run(
    verb: str,
    poc: str,
    inventory: str | None,
    limit: str | None,
    run_id: str | None,
):
    """One stage of ``pocforge run`` on the POC's nodes, into a new run or ``--run-id``'s."""
    from pocforge.cluster import ClusterError
    from pocforge.results.store import RunStore
    from pocforge.runner import NodeFailure, Nodes, RunnerError, run_poc
    from pocforge.runner.cluster import host_key_vars

    spec, inv = _spec_and_inventory(poc, inventory)
    store = RunStore()
    nodes = Nodes(inv, limit=limit, extravars=host_key_vars(spec))
    if verb == "down":
        _teardown(spec, store, run_id, nodes)
    try:
        run = run_poc(
            spec, run_id=run_id, only=[STAGE_OF[verb]], say=click.echo, nodes=nodes, store=store
        )
    except (ClusterError, RunnerError, ValueError, FileNotFoundError) as exc:
        raise click.UsageError(str(exc)) from exc
    except NodeFailure as exc:
        click.echo(f"FAIL {exc}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
    passed = _print_stage(run.path / STAGE_OF[verb] / "result.json")
    click.echo(f"artifacts: {run.path / 'cluster'}")
    click.echo(f"run: {run.path}  (dashboard: pocforge report {spec.name}/{run.path.name})")
    failed = run.manifest.status != "complete" or not passed
    sys.exit(1 if failed else 0)


def _spec_and_inventory(poc: str, inventory: str | None):
    """The POC's spec and its inventory: ``--inventory``, else the spec's hosts or inventory
    (without either, this machine over a local connection); bad input is a usage error."""
    from pocforge.cluster import inventory_from_spec
    from pocforge.paths import workspace_root
    from pocforge.spec import SpecError, load_poc

    try:
        spec = load_poc(poc)
    except SpecError as exc:
        raise click.UsageError(str(exc)) from None
    if refused := over_ssh_only(spec, "cluster"):
        raise click.UsageError(refused)
    if inventory:
        if not Path(inventory).exists():
            raise click.UsageError(f"--inventory {inventory}: no such file")
        return spec, Path(inventory)
    folder = workspace_root() / ".artifacts" / "inventories"
    return spec, inventory_from_spec(spec, folder / f"{spec.name}.yml")


def _dry_run(playbook: str, poc: str, inventory: str | None, limit: str | None) -> None:
    """``--dry-run``: the playbook's hosts and tasks on the POC's inventory, no SSH."""
    from pocforge.cluster import ClusterError
    from pocforge.cluster.driver import dry_run

    _, inv = _spec_and_inventory(poc, inventory)
    try:
        click.echo(dry_run(playbook, inv, limit), nl=False)
    except ClusterError as exc:
        raise click.UsageError(str(exc)) from None


def _teardown(spec, store, run_id: str | None, nodes) -> None:
    """teardown.yml on its own (what every serving and training stage ends with)."""
    from pocforge.cluster import ClusterError, run_playbook_stage
    from pocforge.results.store import Run

    existing = store.root / spec.name / run_id if run_id else None
    if existing is not None and existing.is_dir():
        run = Run.open(existing)
        run.resume()
    else:
        run = store.create(spec, run_id=run_id)
    try:
        result = run_playbook_stage(
            run, VERBS["down"], nodes.inventory, limit=nodes.limit, extravars=nodes.extravars
        )
    except ClusterError as exc:
        run.finish("failed")
        raise click.UsageError(str(exc)) from exc
    run.finish()
    _table(result)
    sys.exit(0 if result.passed else 1)


def _print_stage(path: Path) -> bool:
    """Print a stage's per host x per check table (bring-up, preflight); whether it passed
    (True for a stage that wrote no table)."""
    import json

    if not path.is_file():
        return True
    from pocforge.cluster.events import CheckRecord, ClusterResult, HostResult

    data = json.loads(path.read_text())
    result = ClusterResult(playbook=data["playbook"])
    for name, host in data["hosts"].items():
        checks = {k: CheckRecord(**v) for k, v in (host.get("checks") or {}).items()}
        result.hosts[name] = HostResult(**{**host, "checks": checks})
    _table(result)
    return bool(data.get("passed", True))


def register(main: click.Group) -> None:
    @main.group()
    def cluster() -> None:
        """Bring the cluster up, check it, measure its collectives, tear it down."""

    for verb, playbook in VERBS.items():

        def make(verb=verb, playbook=playbook):
            @cluster.command(name=verb, help=f"Run playbooks/{playbook} against the POC's nodes.")
            @click.argument("poc")
            @click.option(
                "--inventory",
                type=click.Path(dir_okay=False),
                help="An Ansible inventory instead of the one from the spec.",
            )
            @click.option("--limit", help="Only these hosts (Ansible --limit pattern).")
            @click.option(
                "--run-id",
                help="Run folder name under results/<poc>/ (an existing run gets this stage).",
            )
            @click.option(
                "--dry-run",
                is_flag=True,
                help="Print the hosts and the ordered tasks it would run; connect to nothing.",
            )
            def command(poc, inventory, limit, run_id, dry_run):
                if dry_run:
                    _dry_run(playbook, poc, inventory, limit)
                    return
                _run(verb, poc, inventory, limit, run_id)

            return command

        make()
