"""``pocforge rehearse POC [--nodes N]``: the whole cluster POC against N nodes made here.

Each node is a network namespace with its own sshd, hostname and disk (``/opt``, ``/tmp``,
``/root``), which sees nothing of this machine's checkout, workspace or Python
(:mod:`pocforge.rehearse.nodes`), reached over a bridge on 198.51.100.0/24. The POC runs
as ``pocforge run`` runs it on a real cluster (bring-up, preflight, the deployment through
the kit's launcher on every node, the benchmark from here, collect, teardown, report), its
framework brought to the nodes as to GPU nodes: the CPU nodes' environment unpacked by
bring-up (``--runtime venv``) or their image (``--runtime container``), its model staged
from here; the nodes are torn down afterwards, also on failure or Ctrl-C. A POC
engineer rehearses the playbooks here before touching the customer's cluster.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import yaml
from rich.console import Console

from pocforge.cli.common import fail
from pocforge.cli.run import print_verdicts
from pocforge.rehearse.slurm import SlurmCluster, missing_daemons

# The rehearsal nodes have no GPUs, RDMA or spare disk: the preflight checks that need them
# are relaxed.
REHEARSAL_VARS = {
    "preflight_kernel_cmdline_required": [],
    "preflight_disk_min_free_gb": 0,
}
# Keeps a rehearsal light on a small machine (one thread per rank, quiet vLLM), and binds
# gloo to the nodes' link: their hostnames resolve nowhere, and gloo would fall back to
# the loopback address, which the other node cannot reach.
REHEARSAL_ENV = {
    "OMP_NUM_THREADS": "1",
    "VLLM_LOGGING_LEVEL": "WARNING",
    "GLOO_SOCKET_IFNAME": "eth0",
}


def node_runtime(kind: str) -> dict:
    """The runtime of the rehearsal's serving and training, as a CPU node has it: ``venv``,
    the CPU nodes' environment shipped as an archive bring-up unpacks on each node; or
    ``container``, podman with the CPU nodes' image (the same environment in a Debian root
    file system), both built here once per machine. Raises ImageError or NodeEnvError."""
    from pocforge.rehearse import node_env
    from pocforge.rehearse.image import cpu_image

    python = f"{node_env.NODE_VENV}/bin/python"
    if kind == "container":
        return {"kind": "container", "engine": "podman", "image": cpu_image(), "python": python}
    return {"kind": "venv", "python": python, "venv_archive": str(node_env.build())}


def rehearsal_spec(
    source: Path,
    folder: Path,
    addresses: list[str],
    runtime: dict | None = None,
    partition: str | None = None,
    shared: Path | None = None,
) -> Path:
    """A variant of the POC (``include:`` of its spec) whose hosts are the rehearsal nodes,
    or, with a Slurm ``partition``, whose nodes the rehearsal's Slurm allocates; its
    serving and training in ``runtime`` when given; its model, a folder here, staged to
    the nodes from here; a storage KV connector's folder in the nodes' ``shared`` one. The variant's folder holds the POC's
    files too (its patches, datasets, configs): a POC's folder is what bring-up stages on
    the nodes and what its launches name."""
    from pocforge.frameworks.base import model_path
    from pocforge.frameworks.disagg import connector_of
    from pocforge.spec import load_spec
    from pocforge.spec.model_schema import CONTROLLER

    shutil.copytree(
        source.parent, folder, ignore=shutil.ignore_patterns(source.name), dirs_exist_ok=True
    )
    hosts = [{"name": f"h{n}", "address": address} for n, address in enumerate(addresses, 1)]
    variant: dict = {
        "include": str(source.resolve()),
        "cluster": (
            {"hosts": hosts}
            if partition is None
            else {"scheduler": "slurm", "slurm": {"partition": partition}}
        ),
    }
    included = load_spec(source)
    model = Path(model_path(included))
    if included.model.weights is None and model.is_absolute():
        # a model folder here: staged to every node (they see nothing of this machine)
        variant["model"] = {
            "weights": {
                "source": f"{CONTROLLER}{model}",
                "dest": f"/opt/pocforge/models/{model.name}",
            }
        }
    if runtime is not None:
        for deployment in ("serving", "training"):
            if getattr(included, deployment) is not None:
                variant[deployment] = {"runtime": runtime}
    disagg = included.serving.disaggregation if included.serving else None
    if shared is not None and disagg is not None and connector_of(included) == "ExampleConnector":
        # the nodes' NFS, for vLLM's storage connector
        kv = {"shared_storage_path": str(shared / included.name / "kv")}
        variant.setdefault("serving", {})["disaggregation"] = kv
    path = folder / "poc.yaml"
    path.write_text(yaml.safe_dump(variant, sort_keys=False))
    return path


@click.command("rehearse")
@click.argument("poc")
@click.option(
    "--nodes", "count", type=int, help="Nodes to make (default: the spec's cluster.nodes)."
)
@click.option(
    "--stage", "stages", multiple=True, help="Run only these stages of the run (repeatable)."
)
@click.option(
    "--runtime",
    type=click.Choice(["venv", "container"]),
    default="venv",
    show_default=True,
    help="Where serving and training run on the nodes: the CPU nodes' environment bring-up "
    "unpacks on each node (the venv path of a GPU POC), or podman containers of the CPU "
    "nodes' image (the container path); both built here once per machine "
    "(make rehearsal-image).",
)
@click.option(
    "--scheduler",
    type=click.Choice(["ssh", "slurm"]),
    help="How the run reaches the nodes: over SSH, or as job steps of an allocation of a real "
    "Slurm the rehearsal runs on them (slurmctld here, a slurmd in each node); default: the "
    "spec's cluster.scheduler.",
)
def rehearse_cmd(
    poc: str, count: int | None, stages: tuple[str, ...], runtime: str, scheduler: str | None
) -> None:
    """Run a cluster POC end to end against namespaced nodes made on this machine."""
    from pocforge.paths import workspace_root
    from pocforge.rehearse.nodes import missing_prerequisites
    from pocforge.spec import SpecError, load_poc, resolve_spec_path

    try:
        source = resolve_spec_path(poc)
        spec = load_poc(poc)
    except SpecError as exc:
        fail(str(exc))
    scheduler = scheduler or spec.cluster.scheduler
    if scheduler == "slurm" and (why := missing_daemons()):
        fail(f"cannot run Slurm here: {why}")
    if spec.cluster.gpu != "cpu":
        fail(
            f"{spec.name} is sized for {spec.cluster.gpu}; a rehearsal runs the CPU runtime: "
            f"rehearse a CPU variant (`pocforge new {spec.name}-cpu --from {spec.name}`, "
            "then set cluster.gpu: cpu and a tiny model)"
        )
    count = count or spec.cluster.nodes
    if count != spec.cluster.nodes:
        fail(f"--nodes {count}: {spec.name} is planned for cluster.nodes = {spec.cluster.nodes}")
    if why := missing_prerequisites():
        fail(f"cannot make rehearsal nodes here: {why}")
    scratch = workspace_root() / ".artifacts" / "rehearse" / spec.name
    code = 0
    try:
        code = _rehearse(spec, source, scratch, count, list(stages), runtime, scheduler)
    except (OSError, subprocess.CalledProcessError, TimeoutError, RuntimeError) as exc:
        fail(f"rehearsal nodes: {type(exc).__name__}: {exc}")
    click.echo("rehearsal nodes torn down")
    sys.exit(code)


def rehearsal_target(
    made,
    source: Path,
    scratch: Path,
    name: str,
    runtime: str = "venv",
    partition: str | None = None,
):
    """(the POC's variant with the nodes' addresses, how the runner drives the nodes) for the
    rehearsal nodes ``made``, or allocated by the rehearsal's Slurm from ``partition``, its
    serving and training in :func:`node_runtime` ``runtime``; raises SpecError when the
    variant does not load, ImageError or NodeEnvError when the runtime cannot be built."""
    from pocforge.cluster.known_hosts import policy_vars
    from pocforge.frameworks.base import prepare_model
    from pocforge.runner import Nodes
    from pocforge.spec import load_spec

    addresses = [h.address for h in made.hosts]
    # the variant's folder is named as the POC, as every POC folder is
    extravars = dict(REHEARSAL_VARS)
    # mpirun on the first node starts the other ranks over SSH, with the nodes' key
    ssh = f"-i {made.key} -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"
    extravars["collectives_env"] = {
        "OMPI_MCA_plm_rsh_args": f"{ssh} -o LogLevel=ERROR",
        "OMPI_MCA_oob_tcp_if_include": "eth0",
        "OMPI_MCA_btl_tcp_if_include": "eth0",
    }
    if runtime == "container":
        from pocforge.rehearse.image import podman_conf

        # for the podman client the nodes' process manager starts (not the container's env):
        # this machine's engine settings, where the nodes see them (a site's /etc)
        conf = podman_conf(made.site_dir)
        extravars["workload_env"] = {"CONTAINERS_CONF": str(conf)}
        # and for the collectives' ranks, each a container too (mpirun passes it on)
        extravars["collectives_env"]["CONTAINERS_CONF"] = str(conf)
    in_runtime = node_runtime(runtime)
    variant = load_spec(
        rehearsal_spec(
            source, scratch / name, addresses, in_runtime, partition, shared=made.shared_dir
        )
    )
    prepare_model(variant)
    # The nodes' host keys are known (the rehearsal made them): checked strictly, as a
    # customer's cluster is after its first contact.
    extravars.update(policy_vars("strict", made.known_hosts(scratch / "known_hosts")))
    nodes = Nodes(made.inventory(scratch / "inventory.yml"), env=REHEARSAL_ENV, extravars=extravars)
    return variant, nodes


def _rehearse(
    spec,
    source: Path,
    scratch: Path,
    count: int,
    stages: list[str],
    runtime: str = "venv",
    scheduler: str = "ssh",
) -> int:
    from pocforge.rehearse.image import ImageError
    from pocforge.rehearse.node_env import NodeEnvError
    from pocforge.rehearse.nodes import running_cluster
    from pocforge.runner import NodeFailure, RunnerError, run_poc
    from pocforge.spec import SpecError

    code = 0
    with contextlib.ExitStack() as held:
        made = held.enter_context(running_cluster(scratch / "nodes", count))
        click.echo(f"rehearsal nodes: {', '.join(f'{h.name} {h.address}' for h in made.hosts)}")
        partition = None
        if scheduler == "slurm":
            partition = held.enter_context(rehearsal_slurm(made, scratch / "slurm")).partitions[0]
            click.echo(f"rehearsal Slurm: partition {partition}, a slurmd on every node")
        try:
            variant, nodes = rehearsal_target(made, source, scratch, spec.name, runtime, partition)
        except (SpecError, ImageError, NodeEnvError) as exc:
            click.echo(str(exc), err=True)
            return 2
        try:
            run = run_poc(variant, nodes=nodes, only=stages or None, say=click.echo)
            verdict = print_verdicts(run, spec.name, Console())
            passed = verdict in ("pass", "none") and run.manifest.status == "complete"
            code = 0 if passed else 1
        except (RunnerError, SpecError) as exc:
            click.echo(str(exc), err=True)
            code = 2
        except NodeFailure as exc:
            click.echo(f"FAIL {exc}", err=True)
            code = 1
        except KeyboardInterrupt:
            code = 130
        except Exception as exc:  # a stage broke: the run keeps what it gathered
            if os.environ.get("POCFORGE_DEBUG"):
                raise
            click.echo(
                f"error: {type(exc).__name__}: {exc} (POCFORGE_DEBUG=1 for the traceback)", err=True
            )
            code = 1
    return code


@contextlib.contextmanager
def rehearsal_slurm(made, workdir: Path) -> Iterator[SlurmCluster]:
    """A real Slurm over the nodes ``made`` for the block, this process's Slurm clients
    pointed at it (``SLURM_CONF``); its daemons ended after, also on failure."""
    slurm = SlurmCluster(made, workdir)
    before = os.environ.get("SLURM_CONF")
    try:
        slurm.start()
        os.environ["SLURM_CONF"] = str(slurm.conf)
        yield slurm
    finally:
        if before is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = before
        slurm.close()


def register(main: click.Group) -> None:
    main.add_command(rehearse_cmd)
