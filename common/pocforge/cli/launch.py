"""Deployment verbs: ``launch`` (print or start a POC's framework) and ``patch``."""

from __future__ import annotations

import json
import shlex
import signal
import sys
import time
from datetime import UTC, datetime

import click

from pocforge.cli.common import fail
from pocforge.frameworks import ADAPTERS, LaunchContext, plan_all
from pocforge.frameworks.base import prepare_model
from pocforge.frameworks.process import LaunchError, ManagedProcess
from pocforge.paths import workspace_root
from pocforge.spec import SpecError, load_poc


def _spec(target: str):
    try:
        return load_poc(target)
    except SpecError as exc:
        fail(str(exc))


@click.command("launch")
@click.argument("poc")
@click.option(
    "--print",
    "print_only",
    is_flag=True,
    help="Print every node's command, environment and files; start nothing.",
)
@click.option("--json", "as_json", is_flag=True, help="With --print: machine-readable.")
@click.option("--port", type=int, help="Serve on this port instead of the spec's.")
@click.option(
    "--timeout",
    "timeout_s",
    type=float,
    default=600,
    show_default=True,
    help="Seconds to wait for health.",
)
@click.option(
    "--node-rank",
    type=int,
    help="Start only this node's serving launch from the plan (each node of a multi-node "
    "deployment starts its own rank); it binds every interface and answers at the node's "
    "address from the spec.",
)
def launch_cmd(
    poc: str,
    print_only: bool,
    as_json: bool,
    port: int | None,
    timeout_s: float,
    node_rank: int | None,
) -> None:
    """Start POC's serving deployment on this machine (Ctrl-C stops it), or --print every launch."""
    spec = _spec(poc)
    if print_only:
        launches = plan_all(
            spec, LaunchContext(repo=workspace_root(), python="python", sglang_python="python")
        )
        if as_json:
            click.echo(json.dumps([launch.as_dict() for launch in launches], indent=2))
            return
        for launch in launches:
            click.echo(
                f"# {launch.deployment} / {launch.framework} / node {launch.node_rank} ({launch.host}, {launch.role})"
            )
            for key, value in sorted(launch.env.items()):
                click.echo(f"export {key}={shlex.quote(value)}")
            click.echo(launch.command())
            for name, content in launch.files.items():
                click.echo(f"--- {name}\n{content.rstrip()}")
            click.echo()
        return

    if spec.serving is None:
        fail(
            f"{spec.name} has no serving section to launch; for training use `pocforge bench train {spec.name}`"
        )
    if spec.cluster.nodes > 1 and node_rank is None:
        fail(
            f"{spec.name} spans {spec.cluster.nodes} nodes: start each node with --node-rank N "
            "(playbooks/serve.yml does), or --print"
        )
    spec.require_secrets()
    if node_rank is None:
        ctx = LaunchContext.local(workspace_root(), host_override="127.0.0.1", port=port)
        (launch,) = ADAPTERS[spec.serving.framework].plan(spec, ctx)
    else:
        launches = ADAPTERS[spec.serving.framework].plan(
            spec, LaunchContext.local(workspace_root(), port=port)
        )
        ranks = [one for one in launches if one.node_rank == node_rank]
        if not ranks:
            fail(f"--node-rank {node_rank}: {spec.name}'s plan has ranks 0-{len(launches) - 1}")
        (launch,) = ranks
    prepare_model(spec)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    rank = "" if node_rank is None else f"-rank{node_rank}"
    # Not under results/<poc>/: that folder holds runs only.
    log = (
        workspace_root()
        / ".artifacts"
        / "logs"
        / f"{spec.name}-{launch.framework}{rank}-{stamp}.log"
    )
    process = ManagedProcess(launch, log).start()
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        click.echo(f"starting {launch.framework} (pid {process.pid}); log: {log}")
        if launch.health_url is None:  # a headless rank or a Ray worker: nothing to poll
            click.echo(
                f"{spec.name} node {launch.node_rank} ({launch.role}) started; Ctrl-C stops it"
            )
        else:
            waited = process.wait_healthy(timeout_s)
            base = launch.health_url.rsplit("/", 1)[0]
            click.echo(
                f"{spec.name} is serving at {base}/v1 (healthy after {waited:.0f} s); Ctrl-C stops it"
            )
        while True:
            process.check_alive()
            time.sleep(1.0)
    except KeyboardInterrupt:
        _ignore_interrupts()  # before saying so: a second Ctrl-C may follow "stopping" at once
        click.echo("stopping")
    except LaunchError as exc:
        click.echo(str(exc), err=True)
        sys.exit(1)
    finally:
        _ignore_interrupts()
        process.stop()


def _ignore_interrupts() -> None:
    """A second Ctrl-C must not cut the stop short and leave the server's group running;
    stop() is bounded (SIGTERM grace, then SIGKILL)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM stops the server like Ctrl-C does


def register(main: click.Group) -> None:
    main.add_command(launch_cmd)
