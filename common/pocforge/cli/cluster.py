"""Cluster verbs: ``pocforge cluster up|check|collectives|serve|train|down POC [--inventory]``.

Each verb is a stage of a results-store run (``results/<poc>/<run-id>/``; ``--run-id`` of an
existing run adds to it). ``serve`` and ``train`` run their playbook, then collect.yml and
teardown.yml (always), and keep the kit's benchmark output as the run's serving / training
stage.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

VERBS = {
    "up": "bringup.yml",
    "check": "preflight.yml",
    "collectives": "collectives.yml",
    "serve": "serve.yml",
    "train": "train.yml",
    "down": "teardown.yml",
}
WORKLOADS = ("serve", "train")


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


def _open_run(spec, name: str, run_id: str | None):
    """The store run to write into: a new one, or ``--run-id`` of an existing one (so that
    check, then collectives, land in the same run and the same dashboard)."""
    from pocforge.results.store import Run, RunStore

    store = RunStore()
    if run_id and (store.root / name / run_id).is_dir():
        run = Run.open(store.root / name / run_id)
        run.resume()
        return run
    return store.create(spec, poc=name, run_id=run_id)


def _run(
    verb: str,
    poc: str,
    inventory: str | None,
    limit: str | None,
    run_id: str | None,
    pocforge: str = "pocforge",
):
    from pocforge.cluster import (
        ClusterError,
        ClusterExpectations,
        expectations_from_spec,
        inventory_from_spec,
        run_playbook_stage,
    )
    from pocforge.cluster.workload import run_workload

    try:
        spec = _load(poc)
    except Exception as exc:  # the spec loader formats its own errors
        raise click.UsageError(f"{poc}: {exc}") from exc
    name = spec.poc.name if spec is not None else Path(poc).stem
    if inventory:
        inv = Path(inventory)
        if not inv.exists():
            raise click.UsageError(f"--inventory {inventory}: no such file")
    elif spec is None:
        raise click.UsageError("no POC spec loader available: pass --inventory PATH")
    run = _open_run(spec, name, run_id)
    if not inventory:
        inv = inventory_from_spec(spec, run.path / "cluster" / "inventory.yml")
    expectations = expectations_from_spec(spec) if spec is not None else ClusterExpectations()
    live, redraw = _progress()
    try:
        with live:
            if verb in WORKLOADS:
                results = run_workload(
                    run, spec, verb, inv, pocforge=pocforge, limit=limit, on_change=redraw
                )
                result = results[verb]
                ok = all(r.passed for r in results.values())
            else:
                result = run_playbook_stage(
                    run, VERBS[verb], inv, expectations, limit=limit, on_change=redraw
                )
                ok = result.passed
    except (ClusterError, ValueError) as exc:
        run.finish("failed")
        raise click.UsageError(str(exc)) from exc
    except KeyboardInterrupt:
        run.finish("interrupted")
        sys.exit(130)
    run.finish()
    _table(result)
    click.echo(f"artifacts: {run.path / 'cluster'}")
    click.echo(f"run: {run.path}  (dashboard: pocforge report {run.id})")
    sys.exit(0 if ok else 1)


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
                "--pocforge",
                default="pocforge",
                show_default=True,
                hidden=verb not in WORKLOADS,
                help="serve/train: the pocforge command on the nodes.",
            )
            def command(poc, inventory, limit, run_id, pocforge):
                _run(verb, poc, inventory, limit, run_id, pocforge)

            return command

        make()
