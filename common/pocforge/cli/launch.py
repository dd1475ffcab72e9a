"""Deployment verbs: ``launch`` (print or start a POC's framework) and ``patch``.

A node may have more than one launch: with vLLM's Ray layout node 0 runs the Ray head
and the API server. They start in :data:`START_ORDER`, each ready before the next (the
server's Ray client needs the head's GCS port open), under one startup deadline, and stop
in reverse order.
"""

from __future__ import annotations

import json
import shlex
import signal
import socket
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import click

from pocforge.cli.common import fail
from pocforge.frameworks import ADAPTERS, LaunchContext, NodeLaunch, plan_all
from pocforge.frameworks.base import prepare_model
from pocforge.frameworks.process import LaunchError, ManagedProcess
from pocforge.frameworks.startup import startup_timeout_s
from pocforge.paths import workspace_root
from pocforge.spec import PocSpec, SpecError, load_poc

# Roles a node starts first: what others connect to before what connects to it.
START_ORDER = ("ray-head", "ray-worker", "headless", "server", "launcher", "trainer")


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
    help="Seconds to wait for health; default: serving.startup_timeout_s, else derived from "
    "the model's size (weights at 1 GB/s plus 300 s of compiling).",
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
    timeout_s: float | None,
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
    try:
        spec.require_secrets()  # before any work: the model build, a process
    except SpecError as exc:
        fail(str(exc))
    launches = node_launches(spec, node_rank, port)
    prepare_model(spec)
    timeout_s = startup_timeout_s(spec) if timeout_s is None else timeout_s
    processes: list[ManagedProcess] = []
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        start_node(spec, launches, node_rank, timeout_s, click.echo, started=processes)
        while True:
            for process in processes:
                process.check_alive()
            time.sleep(1.0)
    except KeyboardInterrupt:
        _ignore_interrupts()  # before saying so: a second Ctrl-C may follow "stopping" at once
        click.echo("stopping")
    except (StartFailed, LaunchError) as exc:
        click.echo(str(exc), err=True)
        sys.exit(1)
    finally:
        _ignore_interrupts()
        for process in reversed(processes):  # the server before the Ray head it uses
            process.stop()


class StartFailed(RuntimeError):
    """A launch's program could not be started at all (not installed, not executable)."""


def node_launches(spec: PocSpec, node_rank: int | None, port: int | None) -> list[NodeLaunch]:
    """This node's launches from the plan, in :data:`START_ORDER`.

    Without ``node_rank`` (one node) the server binds and answers on 127.0.0.1; with it,
    every interface, at the node's address from the spec."""
    if node_rank is None:
        ctx = LaunchContext.local(workspace_root(), host_override="127.0.0.1", port=port)
        return ADAPTERS[spec.serving.framework].plan(spec, ctx)
    plan = ADAPTERS[spec.serving.framework].plan(
        spec, LaunchContext.local(workspace_root(), port=port)
    )
    mine = [one for one in plan if one.node_rank == node_rank]
    if not mine:
        ranks = sorted({one.node_rank for one in plan})
        fail(f"--node-rank {node_rank}: {spec.name}'s plan has ranks {ranks[0]}-{ranks[-1]}")
    return sorted(mine, key=lambda one: START_ORDER.index(one.role))


def start_node(
    spec: PocSpec,
    launches: list[NodeLaunch],
    node_rank: int | None,
    timeout_s: float,
    say: Callable[[str], None],
    started: list[ManagedProcess],
    log_dir: Path | None = None,
) -> None:
    """Start ``launches`` in order, each ready before the next, all within ``timeout_s``.

    Each process joins ``started`` the moment it runs, so the caller stops every one of
    them, also when a later one fails or Ctrl-C lands mid-start (with interrupts ignored
    by then, so a second Ctrl-C cannot cut the stop short)."""
    # Not under results/<poc>/: that folder holds runs only.
    log_dir = log_dir or workspace_root() / ".artifacts" / "logs"
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    rank = "" if node_rank is None else f"-rank{node_rank}"
    deadline = time.monotonic() + timeout_s
    for launch in launches:
        role = "" if launch.role in ("server", "headless", "ray-worker") else f"-{launch.role}"
        log = log_dir / f"{spec.name}-{launch.framework}{rank}{role}-{stamp}.log"
        try:
            process = ManagedProcess(launch, log).start()
        except OSError as exc:
            raise StartFailed(
                f"{spec.name} node {launch.node_rank}: cannot start the {launch.role} "
                f"({launch.argv[0]}): {exc.strerror or exc}; is it installed on this node?"
            ) from None
        started.append(process)
        what = launch.framework if launch.role == "server" else f"{launch.framework} {launch.role}"
        say(f"starting {what} (pid {process.pid}); log: {log}")
        _wait_ready(spec, process, max(deadline - time.monotonic(), 1.0), say)


def _wait_ready(
    spec: PocSpec, process: ManagedProcess, timeout_s: float, say: Callable[[str], None]
) -> None:
    launch = process.launch
    if launch.health_url is not None:
        waited = process.wait_healthy(timeout_s)
        base = launch.health_url.rsplit("/", 1)[0]
        say(f"{spec.name} is serving at {base}/v1 (healthy after {waited:.0f} s); Ctrl-C stops it")
    elif launch.role == "ray-head":
        port = _flag_value(launch.argv, "--port")
        waited = _wait_listening(process, launch.host, int(port), timeout_s)
        say(f"ray head up at {launch.host}:{port} after {waited:.0f} s")
    else:  # a headless rank or a Ray worker: nothing to poll
        say(f"{spec.name} node {launch.node_rank} ({launch.role}) started; Ctrl-C stops it")


def _flag_value(argv: list[str], flag: str) -> str:
    """``--port=6379`` or ``--port 6379`` in ``argv``: what the process was told to use."""
    for index, arg in enumerate(argv):
        if arg.startswith(f"{flag}="):
            return arg.split("=", 1)[1]
        if arg == flag and index + 1 < len(argv):
            return argv[index + 1]
    raise ValueError(f"{flag} is not in {' '.join(argv)}")


def _wait_listening(process: ManagedProcess, host: str, port: int, timeout_s: float) -> float:
    """Poll until ``host:port`` accepts a TCP connection (a Ray head's GCS); seconds waited."""
    start = time.monotonic()
    while True:
        process.check_alive()
        try:
            with socket.create_connection((host, port), timeout=2):
                return time.monotonic() - start
        except OSError:
            pass
        if time.monotonic() - start > timeout_s:
            process.stop()
            raise LaunchError(
                f"{process.launch.role} not listening on {host}:{port} after {timeout_s:.0f} s",
                process.exit_code(),
                process.log_tail(),
            )
        time.sleep(0.5)


def _ignore_interrupts() -> None:
    """A second Ctrl-C must not cut the stop short and leave the server's group running;
    stop() is bounded (SIGTERM grace, then SIGKILL)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM stops the server like Ctrl-C does


def register(main: click.Group) -> None:
    main.add_command(launch_cmd)
