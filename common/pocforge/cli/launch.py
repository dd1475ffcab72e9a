"""Deployment verbs: ``launch`` (print or start a POC's framework) and ``patch``.

Every launch is planned in its runtime (``pocforge.runtimes``): on a GPU POC ``--print``
shows the container (or venv) command per node, device flags and environment included.
A node may have more than one launch: with vLLM's Ray layout node 0 runs the Ray head
and the API server. They start in ``process.START_ORDER``, each ready before the next
(the server's Ray client needs the head's GCS port open), under one startup deadline, and
stop in reverse order (``process.serve_until_stopped``, the same code the nodes run).
"""

from __future__ import annotations

import json
import shlex
import sys

import click

from pocforge.cli.common import fail
from pocforge.cluster.workload import WORKDIR as NODE_WORKDIR
from pocforge.frameworks import LaunchContext, NodeLaunch
from pocforge.frameworks.base import prepare_model
from pocforge.frameworks.launch_plan import on_node
from pocforge.frameworks.node_launcher import in_start_order, serve_until_stopped
from pocforge.frameworks.patching.on_nodes import FOLDER as OVERLAY
from pocforge.frameworks.patching.on_nodes import MAP_FILE
from pocforge.frameworks.startup import startup_timeout_s
from pocforge.paths import workspace_root
from pocforge.runtimes import RuntimeSpecError, plan_nodes
from pocforge.runtimes.plan import plan_deployment
from pocforge.spec import PocSpec, SpecError, load_poc


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
        try:
            launches = plan_nodes(
                spec, LaunchContext(repo=workspace_root(), python="python", sglang_python="python")
            )
        except RuntimeSpecError as exc:
            fail(f"{spec.source_file}: {exc}")
        # what runs on a node: its working directory where the process manager puts it
        launches = [on_node(launch, NODE_WORKDIR) for launch in launches]
        if as_json:
            click.echo(json.dumps([launch.as_dict() for launch in launches], indent=2))
            return
        if spec.cluster.scheduler == "slurm":
            _print_allocation(spec, launches)
        for launch in launches:
            role = launch.role if launch.instance is None else f"{launch.role} {launch.instance}"
            click.echo(
                f"# {launch.deployment} / {launch.framework} / node {launch.node_rank} ({launch.host}, {role})"
            )
            for key, value in sorted(launch.env.items()):
                click.echo(f"export {key}={shlex.quote(value)}")
            if launch.secrets:
                click.echo(
                    f"# by reference: {', '.join(launch.secrets)} (the node's environment, "
                    f"else {launch.secrets_file})"
                )
            click.echo(launch.command())
            for name, content in launch.files.items():
                if name.startswith(f"{OVERLAY}/") and not name.endswith(MAP_FILE):
                    # the overlay's code: the patches say what changed, its map what is served
                    click.echo(f"--- {name} ({len(content.splitlines())} lines)")
                else:
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
            "(`pocforge run` does, over SSH), or --print"
        )
    try:
        spec.require_secrets()  # before any work: the model build, a process
    except SpecError as exc:
        fail(str(exc))
    launches = node_launches(spec, node_rank, port)
    prepare_model(spec)
    timeout_s = startup_timeout_s(spec) if timeout_s is None else timeout_s
    # Not under results/<poc>/: that folder holds runs only.
    log_dir = workspace_root() / ".artifacts" / "logs"
    sys.exit(serve_until_stopped(spec.name, launches, node_rank, timeout_s, click.echo, log_dir))


def _print_allocation(spec: PocSpec, launches: list[NodeLaunch]) -> None:
    """A Slurm POC's allocation and the image imports its pyxis steps need, before them."""
    from pocforge.runtimes import slurm

    click.echo("# the run's allocation: its job id is {slurm_job}, its nodes {slurm_nodeN}")
    click.echo(shlex.join(slurm.allocation(spec)))
    for image in slurm.images(launches):
        click.echo(f"# {image}: imported once per node for pyxis")
        click.echo(shlex.join(slurm.import_step(spec, image)))
    click.echo()


def node_launches(spec: PocSpec, node_rank: int | None, port: int | None) -> list[NodeLaunch]:
    """This node's launches from the plan, in its runtime, in start order.

    Without ``node_rank`` (one node) the server binds and answers on 127.0.0.1; with it,
    every interface, at the node's address from the spec."""
    override = "127.0.0.1" if node_rank is None else None
    ctx = LaunchContext.local(workspace_root(), host_override=override, port=port)
    try:
        plan = plan_deployment(spec, "serving", ctx)
    except RuntimeSpecError as exc:
        fail(f"{spec.source_file}: {exc}")
    if node_rank is None:
        return in_start_order(plan)
    mine = [one for one in plan if one.node_rank == node_rank]
    if not mine:
        ranks = sorted({one.node_rank for one in plan})
        fail(f"--node-rank {node_rank}: {spec.name}'s plan has ranks {ranks[0]}-{ranks[-1]}")
    return in_start_order(mine)


def register(main: click.Group) -> None:
    main.add_command(launch_cmd)
