"""serve.yml / train.yml inputs from a POC spec: every node's launches, planned here.

The controller plans each node's launches in the deployment's runtime (a container, a venv
or, for ``cluster.gpu: cpu``, the kit's own environments; ``pocforge.runtimes``), with the
node's platform environment merged in. The workload role copies the kit's node launcher
(``pocforge/frameworks/node_launcher.py`` with the process manager and launch plan it
imports, standard library only) and the node's plan file to the node and runs it there:

- serve: ``python3 node_launcher.py serve serve.launches.json`` in the background (a pid file per
  node), the role waits until the launcher reports every launch ready, then each rank with
  an HTTP endpoint answers its health URL; the benchmark runs from the controller;
- train: ``python3 node_launcher.py run train.launches.json`` to completion; rank 0's summary is
  written to ``training/`` in the node's workdir.

So a node needs the framework's runtime and Python 3, not the kit: nothing of the POC's
workspace has to be at the same path there, except for the kit runtime itself (CPU POCs,
where the launch names this machine's ``.venv``).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

# Where the nodes run the launches (the workload role's workdir); collected per host.
WORKDIR = "/opt/pocforge/run"
# Where rank 0 writes the training summary, relative to the workdir (the launch's cwd).
TRAINING_DIR = "training"


# What the node launcher imports, copied beside it (standard library only, all of them)
LAUNCHER_MODULES = ("process.py", "launch_plan.py", "profilers.py")


def launcher_script() -> str:
    """The node launcher the role copies to every node (this kit's own file)."""
    return str(resources.files("pocforge.frameworks").joinpath("node_launcher.py"))


def launcher_files() -> list[str]:
    """The launcher and the modules it imports: everything of the kit a node runs."""
    folder = Path(launcher_script()).parent
    return [launcher_script(), *(str(folder / name) for name in LAUNCHER_MODULES)]


def planned(
    spec: Any, kind: str, node_env: dict[int, dict[str, str]] | None = None, patches: bool = True
) -> list:
    """Every node's launches of the ``kind`` workload, in their runtimes (``patches``: with
    the POC's framework patches, as the POC's deployment runs; without, the parity baseline)."""
    from pocforge.frameworks import LaunchContext
    from pocforge.paths import workspace_root
    from pocforge.runtimes.plan import plan_deployment

    deployment = "serving" if kind == "serve" else "training"
    ctx = LaunchContext.local(workspace_root())
    return plan_deployment(
        spec, deployment, ctx, node_env=node_env or {}, out_dir=Path(TRAINING_DIR), patches=patches
    )


def by_node(launches: list) -> dict[str, list[dict]]:
    """Node rank (as a string, Ansible's dict keys) -> that node's launches, as dicts."""
    plans: dict[str, list[dict]] = {}
    for launch in launches:
        plans.setdefault(str(launch.node_rank), []).append(launch.as_dict())
    return plans


def node_plans(
    spec: Any, kind: str, node_env: dict[int, dict[str, str]] | None = None, patches: bool = True
) -> dict[str, list[dict]]:
    """Node rank (as a string, Ansible's dict keys) -> that node's launches, as dicts."""
    return by_node(planned(spec, kind, node_env, patches))


def check_plans(spec: Any) -> dict[str, list[dict]]:
    """Node rank -> the launches of every workload on it that its framework's parser checks,
    each with its ``check`` (script and input): what bring-up's launch_check role runs in
    each launch's runtime (``pocforge.frameworks.launch_check``)."""
    from pocforge.frameworks import ADAPTERS
    from pocforge.frameworks.base import prepare_model

    if spec.model.tiny is not None:
        prepare_model(spec)  # the kit's tiny test model (what the kit runtime reads)
    checked = []
    for kind, section in (("serve", spec.serving), ("train", spec.training)):
        if section is not None:
            adapter = ADAPTERS[section.framework]
            for launch, script, item in adapter.check_items(planned(spec, kind)):
                launch.check = {"script": script, "item": item}
                checked.append(launch)
    return by_node(checked)


def checker_folder() -> str:
    """Where the node-side checker (launch_check.py, beside launch_plan.py)
    and the argcheck scripts are in this kit."""
    return str(resources.files("pocforge.frameworks"))


def workload_vars(
    spec: Any,
    kind: str,
    *,
    env: dict[str, str] | None = None,
    node_env: dict[int, dict[str, str]] | None = None,
    patches: bool = True,
) -> dict:
    """Extra vars of the workload role for ``spec`` (``kind``: serve or train; ``patches``:
    the POC's framework patches in its serving launches, off for the parity baseline).

    ``env`` goes to every launch of every node, ``node_env`` to one node's (by rank; the
    platform environment from bring-up's facts); a launch's own variables win over both."""
    from pocforge.frameworks.base import prepare_model
    from pocforge.frameworks.startup import startup_timeout_s, training_timeout_s

    section = spec.serving if kind == "serve" else spec.training
    if kind not in ("serve", "train"):
        raise ValueError(f"unknown workload kind {kind!r} (serve or train)")
    if section is None:
        raise ValueError(
            f"{spec.name} has no {'serving' if kind == 'serve' else 'training'} section"
        )
    if spec.model.tiny is not None:
        prepare_model(spec)  # the kit's tiny test model (the kit runtime reads it in place)
    ranks = range(spec.cluster.nodes)
    merged = {rank: {**(env or {}), **(node_env or {}).get(rank, {})} for rank in ranks}
    plans = node_plans(spec, kind, merged, patches)
    timeout_s = startup_timeout_s(spec) if kind == "serve" else training_timeout_s(spec)
    out: dict[str, Any] = {
        "workload_kind": kind,
        "workload_poc": spec.name,
        "workload_launcher": launcher_script(),
        "workload_launcher_files": launcher_files(),
        "workload_plans": plans,
        "workload_timeout_s": int(timeout_s),
    }
    if kind == "serve":
        # a node's last server in start order: a disaggregated deployment's router, which
        # answers only once every instance does, on the node it shares with prefill
        out["workload_health_urls"] = {
            rank: one["health_url"]
            for rank, launches in plans.items()
            for one in launches
            if one.get("health_url")
        }
        # the launcher's own deadline first, so the playbook reads its failure line
        out["workload_health_timeout_s"] = int(timeout_s) + 120
    else:
        out["workload_train_timeout_s"] = int(timeout_s) + 120
    return out


def adopt_training(stage: Any, collected: Path) -> Path | None:
    """Into ``stage``: rank 0's training folder from the node that wrote it, every node's
    launcher logs (``logs/<host>/``) and the other nodes' ranks' profiles (``profile/``);
    the adopted summary's path, or None."""
    workdir = WORKDIR.strip("/")
    nodes = sorted(p for p in collected.iterdir() if p.is_dir()) if collected.is_dir() else []
    for node in nodes:
        found = node / workdir / TRAINING_DIR
        if (found / "summary.json").is_file():
            stage.add_tree(found)
            for other in nodes:
                logs = other / workdir / "logs"
                if logs.is_dir():
                    stage.add_tree(logs, f"logs/{other.name}")
                profiled = other / workdir / TRAINING_DIR / "profile"  # rank<r>.*: no clashes
                if other != node and profiled.is_dir():
                    stage.add_tree(profiled, "profile")
            return stage.dir / "summary.json"
    return None
