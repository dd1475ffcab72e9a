"""The stages of a POC on its nodes: Ansible for the nodes, this machine for the benchmark.

- ``bringup`` (bringup.yml) and ``preflight`` (preflight.yml): facts, GPU stack, NICs, the
  framework's runtime, weights; the acceptance checks per host into the health matrix;
- ``collectives`` (collectives.yml): rccl-tests / nccl-tests across the nodes;
- ``serving``: serve.yml starts every node's rank through the kit's launcher and waits for
  health, then the serving benchmark runs *from this machine* against the entry node (the
  load generator never shares a node with the server), then collect.yml and teardown.yml,
  always, also after a failure or Ctrl-C;
- ``training``: train.yml runs the training launcher on the first node, then collect and
  teardown; its output becomes the run's ``training/`` stage.

A node that fails or cannot be reached fails its stage with its name and the task it was on.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pocforge.bench.from_spec import sweep_config
from pocforge.bench.sweep import run_sweep
from pocforge.cluster import expectations_from_spec, inventory_from_spec, run_playbook_stage
from pocforge.cluster.driver import PLAYBOOKS
from pocforge.cluster.events import ClusterResult
from pocforge.cluster.workload import run_workload, workload_vars
from pocforge.frameworks.base import inventory_hosts, model_path
from pocforge.spec import PocSpec

Say = Callable[[str], None]


class NodeFailure(RuntimeError):
    """A node failed a stage or could not be reached (names the node and the task)."""


@dataclass
class Nodes:
    """The nodes a POC runs on and how the kit drives them."""

    inventory: Path
    pocforge: str = "pocforge"  # the kit's command on the nodes
    env: dict[str, str] = field(default_factory=dict)  # for the framework on every node
    extravars: dict = field(default_factory=dict)  # Ansible variables for every playbook
    limit: str | None = None  # only these hosts (an Ansible --limit pattern)

    @classmethod
    def from_spec(cls, spec: PocSpec, run_path: Path) -> Nodes:
        return cls(inventory_from_spec(spec, run_path / "cluster" / "inventory.yml"))


def unreachable_nodes(inventory: Path, timeout_s: float = 3.0) -> list[str]:
    """The inventory's hosts whose SSH port does not answer now (to name a node that died)."""
    down = []
    for host in inventory_hosts(inventory):
        if host.local:
            continue
        try:
            with socket.create_connection((host.address, host.port), timeout=timeout_s):
                pass
        except OSError:
            down.append(f"{host.name} ({host.address}) does not answer on SSH port {host.port}")
    return down


def _require(result: ClusterResult, what: str) -> None:
    """Raise NodeFailure for the hosts that failed or were unreachable. A host whose only
    failure is its checks' verdict is data for the health matrix, not a failed stage."""

    def broken(host) -> bool:
        if host.status == "unreachable":
            return True
        if host.status != "failed":
            return False
        failed = [c for c in host.checks.values() if c.status == "fail"]
        # The event collector records a failed task as "task: <name>"; the checks' own
        # verdict task ("Verdict | ...") fails on purpose when a check does.
        tasks = [c for c in failed if c.check.startswith("task: ") and "Verdict |" not in c.check]
        checks = [c for c in failed if not c.check.startswith("task: ")]
        return bool(tasks) or not checks

    bad = [h for h in result.hosts.values() if broken(h)]
    if not result.hosts:
        raise NodeFailure(f"{what}: no host ran ({result.status or 'ansible did not start'})")
    if bad:
        detail = "; ".join(
            f"{h.host} {h.status} during {h.task or 'the play'!r}: {(h.error or '').strip()[:300]}"
            for h in bad
        )
        raise NodeFailure(f"{what}: {detail}")


def _playbook(run, nodes: Nodes, spec: PocSpec, name: str, stage: str, say: Say):
    expectations = expectations_from_spec(spec)
    with run.stage(stage) as st:
        result = run_playbook_stage(
            run,
            PLAYBOOKS[name],
            nodes.inventory,
            expectations,
            extravars=nodes.extravars,
            limit=nodes.limit,
        )
        st.write_json("result.json", result.to_dict())
        _require(result, stage)
    states = ", ".join(f"{h.host} {h.status}" for h in result.hosts.values())
    say(f"{stage}: {states}")
    return result


def run_bringup(spec: PocSpec, run, nodes: Nodes, say: Say) -> None:
    _playbook(run, nodes, spec, "up", "bringup", say)


def run_preflight(spec: PocSpec, run, nodes: Nodes, say: Say) -> None:
    result = _playbook(run, nodes, spec, "check", "preflight", say)
    for failure in result.failures():
        say(f"preflight: FAIL {failure.host}: {failure.message}")


def run_collectives(spec: PocSpec, run, nodes: Nodes, say: Say) -> None:
    expectations = expectations_from_spec(spec)
    result = run_playbook_stage(
        run,
        PLAYBOOKS["collectives"],
        nodes.inventory,
        expectations,
        extravars=nodes.extravars,
        limit=nodes.limit,
    )
    _require(result, "collectives")
    say(f"collectives: {', '.join(f'{h.host} {h.status}' for h in result.hosts.values())}")


def entry_url(health_urls: dict[str, str]) -> str:
    """The deployment's base URL at its entry node: the lowest rank that answers HTTP."""
    return health_urls[min(health_urls, key=int)].rsplit("/", 1)[0]


def run_serving(spec: PocSpec, run, nodes: Nodes, say: Say) -> None:
    """Every node's rank up (serve.yml), the sweeps from here, then collect and teardown."""
    variables = {
        **workload_vars(
            spec, "serve", pocforge=nodes.pocforge, env=nodes.env, benchmark_on_node=False
        ),
        **nodes.extravars,
    }
    collected = run.path / "cluster" / "collected"

    def watchdog() -> str | None:  # a node that stops answering ends the sweep at once
        down = unreachable_nodes(nodes.inventory)
        return "; ".join(down) if down else None

    try:
        with run.stage("serving") as stage:
            up = run_playbook_stage(
                run, PLAYBOOKS["serve"], nodes.inventory, extravars=variables, limit=nodes.limit
            )
            _require(up, "serving: starting the ranks")
            base = entry_url(variables["workload_health_urls"])
            say(f"serving: every rank healthy; benchmarking {base} from this machine")
            for workload in spec.serving.workloads:
                say(f"serving: workload {workload.name}")
                cfg = sweep_config(spec, workload, base, model_path(spec))
                summary = run_sweep(cfg, stage.dir / workload.name, stop_when=watchdog)
                if summary.stopped_because:
                    raise NodeFailure(
                        f"serving: workload {workload.name} stopped: {summary.stopped_because}"
                    )
                if summary.status == "interrupted":
                    raise KeyboardInterrupt
                failed = [p.id for p in summary.points if p.status == "failed"]
                if failed:
                    down = unreachable_nodes(nodes.inventory)
                    where = f"; {'; '.join(down)}" if down else ""
                    raise NodeFailure(
                        f"serving: workload {workload.name}: points {', '.join(failed)} failed "
                        f"({next((p.error for p in summary.points if p.error), 'see summary.json')})"
                        f"{where}"
                    )
    finally:
        _collect_and_teardown(run, nodes, collected, say)


def _collect_and_teardown(run, nodes: Nodes, collected: Path, say: Say) -> None:
    try:
        collect = {**nodes.extravars, "collect_dest": str(collected)}
        run_playbook_stage(
            run, PLAYBOOKS["collect"], nodes.inventory, extravars=collect, limit=nodes.limit
        )
    finally:
        down = run_playbook_stage(
            run, PLAYBOOKS["down"], nodes.inventory, extravars=nodes.extravars, limit=nodes.limit
        )
        states = ", ".join(f"{h.host} {h.status}" for h in down.hosts.values())
        say(f"teardown: {states}")


def run_training(spec: PocSpec, run, nodes: Nodes, say: Say) -> None:
    """train.yml on the first node, collect, teardown; the node's output as ``training/``."""
    results = run_workload(
        run,
        spec,
        "train",
        nodes.inventory,
        pocforge=nodes.pocforge,
        env=nodes.env,
        extravars=nodes.extravars,
        limit=nodes.limit,
    )
    _require(results["train"], "training")
    if "training" not in run.manifest.stages:
        raise NodeFailure("training: the first node wrote no training result (see cluster/)")
