"""What a framework adapter produces: for each node of a deployment, the exact launch.

Adapters (``vllm.py``, ``sglang.py``, ``trtllm.py``, ``deepspeed.py``, ``megatron.py``) turn a resolved spec into
``NodeLaunch`` objects and check them with the framework's own argument parser; starting,
health, logs, crash detection and stopping are shared (``process.py``); ``NodeLaunch`` is
defined in ``launch_plan.py``, where a node reads its launches back.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from pocforge.frameworks.launch_plan import NodeLaunch, Role  # noqa: F401 - imported from here
from pocforge.paths import kit_env_python, workspace_root
from pocforge.spec import PocSpec
from pocforge.spec.model_schema import CONTROLLER


class Adapter(Protocol):
    name: str

    def plan(self, spec: PocSpec, ctx: LaunchContext) -> list[NodeLaunch]:
        """Every node's launch for this framework's deployment in ``spec``."""

    def check(self, launches: list[NodeLaunch], ctx: LaunchContext) -> list[tuple[NodeLaunch, str]]:
        """Launches the framework's own parser rejects, with its message ([] when all are
        fine); raises ``ArgcheckUnavailable`` when the framework is not installed."""

    def check_items(self, launches: list[NodeLaunch]) -> list[tuple[NodeLaunch, str, object]]:
        """(launch, argcheck script, its input) for each launch the framework's own parser
        checks: what :meth:`check` runs here and a node's bring-up runs in its runtime."""


# Where a server writes torch-profiler traces on a node when a workload asks for a profile
# (``serving.workloads[].profile``): under the run folder, which a container launch mounts
# and collect.yml fetches; profile.yml moves each point's files out of it into their own
# folder beside it. A run here points it into the run folder.
PROFILE_DIR = "/opt/pocforge/run/profiles/incoming"


def profiled(spec: PocSpec) -> bool:
    """Some workload of the spec asks for a profile."""
    return spec.serving is not None and any(w.profile for w in spec.serving.workloads)


def profiled_workload(spec: PocSpec):
    """The serving stage's first workload with a profile, None when no point is profiled.
    One server serves them all, so validate makes their ``profile.tool`` agree
    (:func:`pocforge.spec.profile_rules.profiled_points_exist`): this one's is the stage's."""
    if spec.serving is None:
        return None
    return next((w for w in spec.serving.workloads if w.profile), None)


@dataclass
class LaunchContext:
    """Where and how the launches run; defaults describe this machine."""

    repo: Path
    python: str = "python"  # interpreter on the nodes (this machine: .venv/bin/python)
    sglang_python: str = "python"  # SGLang's own environment
    host_override: str | None = None  # bind/health host for single-node local launches
    port: int | None = None  # override spec.serving.port (tests pick a free port)
    extra_env: dict[str, str] = field(default_factory=dict)
    node_rank: int | None = None  # which node of the plan this process is (multi-node)
    profile_dir: str | None = None  # where the server writes profiler traces (default: PROFILE_DIR)
    # where the runtime's image keeps a framework's checkout, by training.megatron.entry
    # (the kit's image catalog); {} uses the entry's usual place
    checkouts: dict[str, str] = field(default_factory=dict)

    @classmethod
    def local(cls, repo: Path | None = None, **kwargs) -> LaunchContext:
        """This machine: the kit's own environments, found from the kit's checkout (not from
        the POC workspace, which may live anywhere): ``.venv`` and ``.venv-sglang``."""
        repo = repo or workspace_root()
        venv = kit_env_python(".venv")
        sglang = kit_env_python(".venv-sglang")
        return cls(
            repo=repo,
            python=str(venv) if venv.exists() else sys.executable,
            sglang_python=str(sglang) if sglang.exists() else "python",
            **kwargs,
        )


# A node of a Slurm allocation not named in the spec: known once Slurm allocates it (the
# run puts in the allocation's node names, as the process manager puts in the workdir)
SLURM_NODE = "{{slurm_node{rank}}}"


def node_hosts(spec: PocSpec, ctx: LaunchContext) -> list[str]:
    """Address per node rank: the spec's hosts, its inventory, else placeholders ``node0``…;
    on a Slurm cluster the allocation's nodes (its hosts once a run holds it, else
    ``slurm.nodelist``, else :data:`SLURM_NODE`)."""
    if ctx.host_override is not None:
        return [ctx.host_override] * spec.cluster.nodes
    slurm = spec.cluster.slurm
    if slurm is not None and not spec.cluster.hosts:
        return list(slurm.nodelist) or [
            SLURM_NODE.format(rank=rank) for rank in range(spec.cluster.nodes)
        ]
    if spec.cluster.hosts:
        return [h.address for h in spec.cluster.hosts]
    if spec.cluster.inventory and spec.source_dir:
        found = inventory_addresses(spec.source_dir / spec.cluster.inventory)
        if len(found) >= spec.cluster.nodes:
            return found[: spec.cluster.nodes]
    return [f"node{rank}" for rank in range(spec.cluster.nodes)]


@dataclass(frozen=True)
class InventoryHost:
    name: str
    address: str  # ``ansible_host`` when set, else the name
    port: int  # ``ansible_port`` of the host or a group above it, else 22
    local: bool  # ``ansible_connection: local`` (the controller itself)
    variables: dict = field(default_factory=dict, compare=False)  # its merged Ansible vars


def inventory_hosts(path: Path) -> list[InventoryHost]:
    """Hosts of a YAML Ansible inventory in file order, group variables inherited."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError):
        return []
    found: dict[str, InventoryHost] = {}

    def walk(group: object, inherited: dict) -> None:
        if not isinstance(group, dict):
            return
        variables = {**inherited, **(group.get("vars") or {})}
        for name, hostvars in (group.get("hosts") or {}).items():
            merged = {**variables, **(hostvars if isinstance(hostvars, dict) else {})}
            found.setdefault(
                name,
                InventoryHost(
                    name=name,
                    address=str(merged.get("ansible_host", name)),
                    port=int(merged.get("ansible_port", 22)),
                    local=merged.get("ansible_connection") == "local",
                    variables=merged,
                ),
            )
        for child in (group.get("children") or {}).values():
            walk(child, variables)

    for group in (data or {}).values() if isinstance(data, dict) else []:
        walk(group, {})
    return list(found.values())


def inventory_addresses(path: Path) -> list[str]:
    """Addresses of a YAML Ansible inventory's hosts in file order."""
    return [host.address for host in inventory_hosts(path)]


def model_path(spec: PocSpec) -> str:
    """The model argument: where bring-up staged the weights, a local folder resolved
    against the POC folder, else the hub id."""
    if spec.model.weights is not None:
        return spec.model.weights.dest
    candidate = (spec.source_dir / spec.model.id) if spec.source_dir else Path(spec.model.id)
    if spec.model.tiny is not None or candidate.exists():
        return str(candidate.resolve())
    return spec.model.id


def controller_model(spec: PocSpec) -> str:
    """The model as the machine that runs the kit reads it (the benchmark client's and the
    accuracy task's tokenizer; where the tiny model is built): a ``controller:`` staging
    source's folder, else what the launches name."""
    weights = spec.model.weights
    if weights is not None and weights.source.startswith(CONTROLLER):
        folder = Path(weights.source.removeprefix(CONTROLLER))
        if spec.source_dir is not None:
            folder = spec.source_dir / folder
        return str(folder.resolve())
    return model_path(spec)


def prepare_model(spec: PocSpec) -> str:
    """Make sure the model folder exists: build the spec's tiny model if it asks for one,
    where this machine reads it (:func:`controller_model`); its path."""
    path = controller_model(spec)
    tiny = spec.model.tiny
    # on a node, where bring-up staged it, nothing is built
    staged = (Path(model_path(spec)) / "config.json").is_file()
    if tiny is not None and not staged and not (Path(path) / "config.json").is_file():
        from pocforge.tiny_model.make import make_tiny

        make_tiny(path, arch=tiny.arch, seed=tiny.seed)
    return path


def flag_args(options: dict[str, object]) -> list[str]:
    """``{"max-num-seqs": 8, "enforce-eager": True, "x": False, "y": [1, 2]}`` as CLI flags.

    True is a bare flag, False is ``--no-<name>`` (argparse's BooleanOptionalAction, which
    vLLM and SGLang use), lists are repeated values, None is left out.
    """
    import json

    argv: list[str] = []
    for key, value in options.items():
        name = key if key.startswith("--") else f"--{key.replace('_', '-')}"
        if value is None:
            continue
        if value is True:
            argv.append(name)
        elif value is False:
            argv.append(f"--no-{name[2:]}")
        elif isinstance(value, list):
            argv += [name, *(str(v) for v in value)]
        elif isinstance(value, dict):
            argv += [name, json.dumps(value, separators=(",", ":"))]
        else:
            argv += [name, str(value)]
    return argv
