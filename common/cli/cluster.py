"""Cluster verbs: ``pocforge cluster up|check|collectives|down POC [--inventory] [--limit]``."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

import click

VERBS = {
    "up": "bringup.yml",
    "check": "preflight.yml",
    "collectives": "collectives.yml",
    "down": "teardown.yml",
}


def _load(poc: str):
    try:
        from pocforge.spec import load_poc
    except ImportError:
        return None
    return load_poc(poc)


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


def _run(verb: str, poc: str, inventory: str | None, limit: str | None, run_id: str | None):
    from pocforge.cluster import (
        ClusterError,
        ClusterExpectations,
        expectations_from_spec,
        inventory_from_spec,
        run_playbook,
    )

    run_id = run_id or datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    try:
        spec = _load(poc)
    except Exception as exc:  # the spec loader formats its own errors
        raise click.UsageError(f"{poc}: {exc}") from exc
    name = spec.poc.name if spec is not None else Path(poc).stem
    run_dir = Path("results") / name / run_id
    if inventory:
        inv = Path(inventory)
        if not inv.exists():
            raise click.UsageError(f"--inventory {inventory}: no such file")
    elif spec is not None:
        inv = inventory_from_spec(spec, run_dir / "cluster" / "inventory.yml")
    else:
        raise click.UsageError("no POC spec loader available: pass --inventory PATH")
    expectations = expectations_from_spec(spec) if spec is not None else ClusterExpectations()
    live, redraw = _progress()
    try:
        with live:
            result = run_playbook(
                VERBS[verb], inv, run_dir, expectations, limit=limit, on_change=redraw
            )
    except ClusterError as exc:
        raise click.UsageError(str(exc)) from exc
    _table(result)
    click.echo(f"artifacts: {run_dir / 'cluster'}")
    sys.exit(0 if result.passed else 1)


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
            @click.option("--run-id", help="Run folder name under results/<poc>/.")
            def command(poc, inventory, limit, run_id):
                _run(verb, poc, inventory, limit, run_id)

            return command

        make()
