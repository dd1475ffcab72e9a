"""The stages of a POC on its nodes: Ansible for the nodes, this machine for the benchmark.

- ``bringup`` (bringup.yml) and ``preflight`` (preflight.yml): facts, GPU stack, NICs, the
  framework's runtime, weights; the acceptance checks per host into the health matrix;
- ``collectives`` (collectives.yml): rccl-tests / nccl-tests across the nodes, and DeepEP's
  dispatch/combine tests for an expert-parallel deployment;
- ``serving``: serve.yml starts every node's launches as planned here, in the deployment's
  runtime, and waits for health, then the serving benchmark runs *from this machine*
  against the entry node (the load generator never shares a node with the server), then
  collect.yml and teardown.yml, always, also after a failure or Ctrl-C; every node's
  telemetry, recorded while its launches ran, gives each point its energy then
  (:mod:`pocforge.runner.node_telemetry`);
- ``parity``: the baseline deployment (the framework's own kernels) up on the nodes the same
  way, the parity prompts from this machine, compared with the serving stage's answers;
- ``training``: train.yml runs every node's training launch to completion, then collect
  and teardown; rank 0's summary becomes the run's ``training/`` stage.

A node that fails or cannot be reached fails its stage with its name and the task it was on.
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pocforge.bench.from_spec import sweep_config
from pocforge.bench.sweep import Hooks, PointHook, run_sweep
from pocforge.cluster import expectations_from_spec, inventory_from_spec, run_playbook_stage
from pocforge.cluster.driver import PLAYBOOKS
from pocforge.cluster.ep_alltoall import ep_tests
from pocforge.cluster.events import ClusterResult
from pocforge.cluster.gloo_tools import gloo_tools
from pocforge.cluster.known_hosts import known_hosts_path, policy_vars
from pocforge.cluster.slurm_client import SlurmError, node_lost
from pocforge.cluster.workload import adopt_training, check_plans, checker_folder, workload_vars
from pocforge.frameworks.base import controller_model, inventory_hosts
from pocforge.frameworks.gpu_profiler import rocprof_point
from pocforge.frameworks.patching.on_nodes import FOLDER as OVERLAY
from pocforge.frameworks.patching.on_nodes import MAP_FILE
from pocforge.runner import gates
from pocforge.runner.node_profile import NodeProfileHook, adopt_profiles
from pocforge.runner.node_telemetry import (
    ClockHook,
    node_series,
    record_clocks,
    recorder_vars,
    serving_energy,
    training_energy,
)
from pocforge.runtimes.provision import kit_wheels, needs_kit_wheels
from pocforge.spec import PocSpec

Say = Callable[[str], None]


class NodeFailure(RuntimeError):
    """A node failed a stage or could not be reached (names the node and the task)."""


@dataclass
class Nodes:
    """The nodes a POC runs on and how the kit drives them."""

    inventory: Path
    env: dict[str, str] = field(default_factory=dict)  # for the framework on every node
    # per node rank, the platform's variables (device visibility, RCCL/NCCL network)
    node_env: dict[int, dict[str, str]] = field(default_factory=dict)
    extravars: dict = field(default_factory=dict)  # Ansible variables for every playbook
    limit: str | None = None  # only these hosts (an Ansible --limit pattern)

    @classmethod
    def from_spec(cls, spec: PocSpec, run_path: Path) -> Nodes:
        inventory = inventory_from_spec(spec, run_path / "cluster" / "inventory.yml")
        return cls(inventory, extravars=host_key_vars(spec))


def host_key_vars(spec: PocSpec) -> dict:
    """The SSH host-key policy of ``spec`` as every playbook's variables (``off`` is said
    aloud: it is recorded in the run's ``cluster/known_hosts.json`` too)."""
    mode = spec.cluster.ssh.host_keys
    if mode == "off":
        print(
            f"warning: {spec.name}: SSH host keys are not checked (cluster.ssh.host_keys: off); "
            "a man in the middle would go unnoticed"
        )
    return policy_vars(mode, known_hosts_path(spec))


def unreachable_nodes(inventory: Path, timeout_s: float = 3.0) -> list[str]:
    """The inventory's hosts whose SSH port does not answer now, or that Slurm reports
    lost (to name a node that died)."""
    down = []
    for host in inventory_hosts(inventory):
        if host.local:
            continue
        if host.variables.get("ansible_connection") == "srun":
            with contextlib.suppress(SlurmError):  # a controller that does not answer: no news
                if state := node_lost(host.name):
                    down.append(f"{host.name} ({host.address}): Slurm reports it {state}")
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


def _playbook(
    run, nodes: Nodes, spec: PocSpec, name: str, stage: str, say: Say, extravars: dict | None = None
):
    expectations = expectations_from_spec(spec)
    with run.stage(stage) as st:
        result = run_playbook_stage(
            run,
            PLAYBOOKS[name],
            nodes.inventory,
            expectations,
            extravars={**(extravars or {}), **nodes.extravars},
            limit=nodes.limit,
        )
        st.write_json("result.json", result.to_dict())
        _require(result, stage)
    states = ", ".join(f"{h.host} {h.status}" for h in result.hosts.values())
    say(f"{stage}: {states}")
    return result


def run_bringup(spec: PocSpec, run, nodes: Nodes, say: Say) -> None:
    """bringup.yml; the kit's wheels are built here first when a runtime needs them."""
    extravars: dict = {}
    if needs_kit_wheels(spec):
        wheels = kit_wheels()
        say(f"bringup: the kit's wheels for the nodes from {wheels}")
        extravars["python_env_wheels_src"] = str(wheels)
    # every launch checked by its framework in its runtime, before the weights are staged
    extravars["launch_check_plans"] = check_plans(spec)
    extravars["launch_check_kit"] = checker_folder()
    _playbook(run, nodes, spec, "up", "bringup", say, extravars)


def run_preflight(spec: PocSpec, run, nodes: Nodes, say: Say) -> None:
    result = _playbook(run, nodes, spec, "check", "preflight", say)
    for failure in result.failures():
        say(f"preflight: FAIL {failure.host}: {failure.message}")


# The kit's gloo benchmark on CPU nodes: small messages (a CPU link, not a GPU fabric).
CPU_COLLECTIVES = {
    "collectives_cpu_ranks": 1,
    "collectives_min_bytes": "1M",
    "collectives_max_bytes": "16M",
    "collectives_mpirun_args": "--allow-run-as-root --bind-to none",
}
CPU_COLLECTIVES_PORT = "29510"


def collectives_vars(spec: PocSpec, run, nodes: Nodes) -> dict:
    """collectives.yml's variables for ``spec``: on CPU nodes the kit's gloo benchmark
    behind nccl-tests' names, written on each node in the POC's runtime
    (:mod:`pocforge.cluster.gloo_tools`); on GPUs with expert parallelism, DeepEP's dispatch/combine
    tests at the model's shape (:func:`pocforge.cluster.ep_alltoall.ep_tests`)."""
    extravars = dict(nodes.extravars)
    tests = ep_tests(spec)
    if tests:
        extravars = {"collectives_ep_tests": tests, **extravars}
    if spec.cluster.gpu == "cpu":
        hosts = inventory_hosts(nodes.inventory)
        env = {
            **nodes.env,
            "MASTER_ADDR": hosts[0].address if hosts else "127.0.0.1",
            "MASTER_PORT": CPU_COLLECTIVES_PORT,
            **extravars.get("collectives_env", {}),
        }
        extravars = {
            **CPU_COLLECTIVES,
            "collectives_gloo_tools": gloo_tools(spec),
            **extravars,
            "collectives_env": env,
        }
    return extravars


def run_collectives(spec: PocSpec, run, nodes: Nodes, say: Say) -> None:
    """collectives.yml: rccl-tests / nccl-tests on GPUs, and DeepEP's all-to-all tests for
    an expert-parallel deployment; on CPU nodes the kit's gloo benchmark
    (``pocforge.cluster.gloo_perf``) with the same table and checks."""
    result = run_playbook_stage(
        run,
        PLAYBOOKS["collectives"],
        nodes.inventory,
        expectations_from_spec(spec),
        extravars=collectives_vars(spec, run, nodes),
        limit=nodes.limit,
    )
    _require(result, "collectives")
    say(f"collectives: {', '.join(f'{h.host} {h.status}' for h in result.hosts.values())}")


def entry_url(health_urls: dict[str, str]) -> str:
    """The deployment's base URL at its entry node: the lowest rank that answers HTTP."""
    return health_urls[min(health_urls, key=int)].rsplit("/", 1)[0]


def node_platform_env(spec: PocSpec, run, nodes: Nodes, deployment: str) -> dict[int, dict]:
    """Each node's platform variables (device visibility, RCCL/NCCL network selection,
    the framework's platform switches) from this run's bring-up facts, recorded with what
    each came from in ``cluster/platform_env.<deployment>.json``; ``nodes.node_env`` (given
    by the caller) wins. Without bring-up facts in the run (a stage run alone): none."""
    from pocforge.runtimes.platform_env import PlatformEnvError, platform_env_provenance, values

    bringup = run.path / "bringup" / "result.json"
    if not bringup.is_file():
        return dict(nodes.node_env)
    facts = {
        name: host.get("facts") or {}
        for name, host in json.loads(bringup.read_text())["hosts"].items()
    }
    hosts = inventory_hosts(nodes.inventory)[: spec.cluster.nodes]
    try:
        provenance = platform_env_provenance(
            spec,
            facts,
            [host.name for host in hosts],
            addresses={host.name: host.address for host in hosts},
            deployment=deployment,
        )
    except PlatformEnvError as exc:
        raise NodeFailure(f"{deployment}: the platform environment: {exc}") from None
    run.write_json(
        f"cluster/platform_env.{deployment}.json", {str(k): v for k, v in provenance.items()}
    )
    return {
        rank: {**values(entries), **nodes.node_env.get(rank, {})}
        for rank, entries in provenance.items()
    }


def run_serving(spec: PocSpec, run, nodes: Nodes, say: Say) -> None:
    """Every node's rank up (serve.yml), the sweeps from here, then collect and teardown."""
    node_env = node_platform_env(spec, run, nodes, "serving")
    variables = {
        **workload_vars(spec, "serve", env=nodes.env, node_env=node_env),
        **recorder_vars("serve"),
        **nodes.extravars,
    }
    collected = run.path / "cluster" / "collected"
    _record_patches(run, variables["workload_plans"])

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
            try:
                gates.sanity_gate(spec, base, stage.dir, say)
            except gates.GateError as exc:
                raise NodeFailure(str(exc)) from None
            for workload in spec.serving.workloads:
                say(f"serving: workload {workload.name}")
                cfg = sweep_config(spec, workload, base, controller_model(spec))
                hook: PointHook = ClockHook(run, nodes, say)
                if workload.profile:
                    profile = NodeProfileHook(
                        base,
                        spec.serving.framework,
                        workload.profile.points,
                        workload.name,
                        run,
                        nodes,
                        say,
                        tool=workload.profile.tool,
                    )
                    hook = Hooks(hook, profile)
                summary = run_sweep(cfg, stage.dir / workload.name, hook=hook, stop_when=watchdog)
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
            gates.accuracy_tasks(spec, base, stage.dir, say)
            gates.parity_candidate(spec, base, stage.dir, say)
    finally:
        rocprof = rocprof_point(spec)  # its files come at the servers' exit: stop them first
        _collect_and_teardown(run, nodes, collected, say, stop_first=rocprof is not None)
        with _telemetry_is_extra(say):  # the points' energy, from what the nodes recorded
            serving_energy(spec, run, node_series(run, collected, "serve", say), say)
        with _telemetry_is_extra(say, "profile: the nodes' files"):
            profiled = [w.name for w in spec.serving.workloads if w.profile]
            adopt_profiles(run, collected, profiled, say, rocprof=rocprof)


# What a cluster's parity stage compares, said in its result.
ON_NODES = (
    "the candidate and the baseline both ran on the nodes in the POC's runtime; the baseline "
    "without the kit's kernels and without the POC's framework patches (its launches carry "
    "no patch overlay)"
)


def run_parity(spec: PocSpec, run, nodes: Nodes, say: Say) -> None:
    """The parity gate on the nodes: the baseline (the same deployment with the framework's
    own kernels) started there as the serving stage's deployment was, the parity prompts
    asked from here, compared with the POC's answers (the serving stage's); every baseline
    collected and torn down, also after a failure."""
    node_env = node_platform_env(spec, run, nodes, "serving")

    @contextlib.contextmanager
    def deployed(variant: PocSpec, folder: Path) -> Iterator[tuple[str, None]]:
        variables = {
            **workload_vars(variant, "serve", env=nodes.env, node_env=node_env, patches=False),
            **nodes.extravars,
        }
        try:
            up = run_playbook_stage(
                run, PLAYBOOKS["serve"], nodes.inventory, extravars=variables, limit=nodes.limit
            )
            _require(up, "parity: starting the baseline")
            yield entry_url(variables["workload_health_urls"]), None
        finally:
            _collect_and_teardown(run, nodes, folder / "collected", say)

    with run.stage("parity") as stage:
        try:
            gates.run_parity_stage(spec, stage.dir, say, deployed, [ON_NODES])
        except gates.GateError as exc:
            raise NodeFailure(str(exc)) from None


def _record_patches(run, plans: dict[str, list[dict]]) -> None:
    """Which framework patches each node's serving launches run (their overlay's map,
    :mod:`~pocforge.frameworks.patching.on_nodes`), in ``cluster/patches.serving.json``."""
    ran = {}
    for launches in plans.values():
        for launch in launches:
            found = launch.get("files", {}).get(f"{OVERLAY}/{MAP_FILE}")
            if found:
                plan = json.loads(found)
                ran.setdefault(launch["host"], {})[launch["role"]] = {
                    key: plan[key] for key in ("framework", "version", "patches")
                }
    if ran:
        run.write_json("cluster/patches.serving.json", ran)


def teardown_leftovers(run, nodes: Nodes, say: Say) -> None:
    """Before a stage cut off mid-run (the controller killed outright) runs again: its
    deployment may still be up on the nodes, holding their ports and GPUs, since the
    teardown that follows every stage never ran. teardown.yml stops it."""
    down = run_playbook_stage(
        run, PLAYBOOKS["down"], nodes.inventory, extravars=nodes.extravars, limit=nodes.limit
    )
    states = ", ".join(f"{h.host} {h.status}" for h in down.hosts.values())
    say(f"teardown of the cut-off attempt: {states}")


@contextlib.contextmanager
def _telemetry_is_extra(say: Say, what: str = "telemetry: the nodes' figures") -> Iterator[None]:
    """Telemetry (and a profile) never fails a stage nor hides the error that ended it: a
    problem with it is said in one line."""
    try:
        yield
    except Exception as exc:
        say(f"{what} not made ({type(exc).__name__}: {exc})")


def _collect_and_teardown(
    run, nodes: Nodes, collected: Path, say: Say, stop_first: bool = False
) -> None:
    """collect.yml, then teardown.yml, also when collect fails. ``stop_first``: collect
    stops the launchers before it lists the files (rocprofv3 writes at exit)."""
    try:
        collect = {**nodes.extravars, "collect_dest": str(collected)}
        if stop_first:
            collect["collect_stop_launchers"] = True
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
    """train.yml on every node, collect, teardown; rank 0's output as ``training/``."""
    from pocforge.results.adapters import from_training_summary
    from pocforge.training.summary import TrainingSummary

    node_env = node_platform_env(spec, run, nodes, "training")
    variables = {
        **workload_vars(spec, "train", env=nodes.env, node_env=node_env),
        **recorder_vars("train"),
        **nodes.extravars,
    }
    collected = run.path / "cluster" / "collected"
    with _telemetry_is_extra(say):
        record_clocks(run, nodes, "training", say)
    started = time.time()
    try:
        done = run_playbook_stage(
            run, PLAYBOOKS["train"], nodes.inventory, extravars=variables, limit=nodes.limit
        )
    finally:
        ended = time.time()
        _collect_and_teardown(run, nodes, collected, say)
    _require(done, "training")
    with run.stage("training") as stage:
        found = adopt_training(stage, collected)
        if found is None:
            raise NodeFailure("training: no node wrote a training summary (see cluster/collected)")
        summary = TrainingSummary.model_validate_json(found.read_text())
        with _telemetry_is_extra(say):
            series = node_series(run, collected, "train", say)
            training_energy(spec, run, series, started, ended, say, summary)
        stage.write_json(
            "result.json", json.loads(from_training_summary(summary).model_dump_json())
        )
    say(
        f"training: {summary.tokens_per_s_per_gpu:,.0f} tokens/s/GPU, "
        f"final loss {summary.final_loss:.3f}"
    )
