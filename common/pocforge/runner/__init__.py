"""``pocforge run POC``: every stage the spec implies, as one resumable run.

Where the stages run follows from the spec:

- **here**, for a single-node POC with no hosts or inventory of its own (the CPU demo):
  ``kernels`` → ``serving`` → ``parity`` → ``training`` → ``report`` (:mod:`.local`);
- **on its nodes**, for a POC with hosts or an inventory, or given one (``pocforge
  rehearse`` gives its namespaced nodes): ``bringup`` → ``preflight`` → ``collectives`` →
  ``kernels`` → ``serving`` → ``training`` → ``report`` (:mod:`.cluster`), every node driven
  by Ansible, the serving benchmark run from this machine against the entry node,
  collect and teardown after every workload, also after a failure or Ctrl-C.

Each stage is a folder of the run (``results/<poc>/<run-id>/<stage>/``) marked running →
complete | failed | interrupted in the manifest. ``--resume RUN`` skips the stages
already complete (a failed or interrupted one runs again, its attempt kept). Ctrl-C (or
SIGTERM) stops the stage in progress; everything gathered so far stays in the run, and
the report is still rendered.
"""

from __future__ import annotations

import contextlib
import dataclasses
import signal
from collections.abc import Callable

from pocforge.frameworks.process import stop_leftovers
from pocforge.results.secrets import Redactor
from pocforge.results.store import Run, RunStore
from pocforge.runner import cluster, local, slurm
from pocforge.runner.cluster import NodeFailure, Nodes
from pocforge.spec import PocSpec

LOCAL_STAGES = ("kernels", "serving", "parity", "training", "report")
CLUSTER_STAGES = (
    "bringup",
    "preflight",
    "collectives",
    "kernels",
    "serving",
    "parity",
    "training",
    "report",
)
Say = Callable[[str], None]


class RunnerError(RuntimeError):
    """A POC this runner cannot run (one clear line)."""


def on_nodes(spec: PocSpec, nodes: Nodes | None) -> bool:
    """Whether the POC runs on nodes (Ansible) rather than on this machine."""
    return (
        nodes is not None
        or bool(spec.cluster.hosts or spec.cluster.inventory)
        or spec.cluster.scheduler == "slurm"
    )


def wants(spec: PocSpec, name: str, remote: bool) -> bool:
    """Whether the spec implies stage ``name`` where it runs.

    The kernel benchmark runs on this machine; on a GPU cluster it belongs on a node with
    the GPUs (``scripts/gpu-kernels.sh``, then ``pocforge import``), so a cluster run of a
    GPU POC leaves it out rather than timing kernels on the controller."""
    if name == "kernels":
        on_gpus = remote and spec.cluster.gpu != "cpu"
        return spec.kernels is not None and bool(spec.kernels.ops) and not on_gpus
    if name in ("serving", "training"):
        return getattr(spec, name, None) is not None
    if name == "parity":
        return spec.serving is not None and spec.serving.parity is not None
    if name == "collectives":
        named = any(c.parts[0] == "collectives" for c in spec.acceptance.criteria)
        return remote and (named or spec.cluster.nodes > 1)  # CPU nodes: the gloo benchmark
    return name == "report" or remote


# The stages that leave a deployment on the nodes while they run.
DEPLOYED = ("serving", "parity", "training")
# The stages a cluster run drives through Ansible; they mark their own stage records.
CLUSTER_STEPS = {
    "bringup": cluster.run_bringup,
    "preflight": cluster.run_preflight,
    "collectives": cluster.run_collectives,
    "serving": cluster.run_serving,
    "parity": cluster.run_parity,
    "training": cluster.run_training,
}


def run_poc(
    spec: PocSpec,
    *,
    resume: str | None = None,
    run_id: str | None = None,
    only: list[str] | None = None,
    say: Say = print,
    nodes: Nodes | None = None,
    here: bool = False,
    node_rank: int | None = None,
    store: RunStore | None = None,
) -> Run:
    """Run (or resume) ``spec``'s stages; returns the run. Raises ``RunnerError`` up front.

    ``run_id``: the run to add to, created with that id when it does not exist yet.
    ``nodes``: run on these nodes (an inventory and how to drive them); default: the
    spec's own hosts or inventory when it has any, else this machine. ``here``: on this
    machine whatever the spec's hosts (a node running its part: ``pocforge bench train`` on
    every node runs its own ranks). ``node_rank``: with ``here``, this node's part of a
    multi-node deployment.
    """
    remote = not here and on_nodes(spec, nodes)
    order = CLUSTER_STAGES if remote else LOCAL_STAGES
    unknown = sorted(set(only or []) - set(order))
    if unknown:
        where = "on its nodes" if remote else "on this machine"
        raise RunnerError(
            f"--stage {', '.join(unknown)}: {spec.name} runs {where}, with stages {', '.join(order)}"
        )
    if not remote and spec.cluster.nodes > 1 and (only or list(LOCAL_STAGES)) != ["training"]:
        raise RunnerError(
            f"{spec.name} spans {spec.cluster.nodes} nodes: give it cluster.hosts or "
            "cluster.inventory, or rehearse it here with `pocforge rehearse`"
        )
    if spec.cluster.gpu != "cpu" and not remote:
        say(
            f"note: {spec.name} is sized for {spec.cluster.gpu}; running it on this machine as one node"
        )
    spec.require_secrets()
    store = store or RunStore()
    if run_id is not None and (store.root / spec.name / run_id).is_dir():
        resume = run_id  # add this stage to that run (the cluster verbs thread one run)
    if resume:
        run = Run.open(store.resolve(f"{spec.name}/{resume}"))
        run.redactor = Redactor.for_spec(spec)
        run.resume()
    else:
        run = store.create(spec, run_id=run_id)
    if not (run.path / "plan.json").exists():
        _write_plan(spec, run, say)
    wanted = [s for s in order if (only is None or s in only) and wants(spec, s, remote)]
    if remote and spec.cluster.gpu != "cpu" and spec.kernels and spec.kernels.ops:
        say("kernels: benchmarked on a GPU node (scripts/gpu-kernels.sh), not in a cluster run")
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        with contextlib.ExitStack() as held:
            if remote:
                spec, nodes = _reach_nodes(spec, run, nodes, held, say)
            for name in wanted:
                done = run.manifest.stages.get(name)
                if done is not None and done.status == "complete":
                    say(f"{name}: complete in {run.path.name}, skipped")
                    continue
                if name == "report":
                    continue  # rendered below, once the run's status is final
                if done is not None and not remote:
                    for line in stop_leftovers(run.path / name):
                        say(f"{name}: {line}")
                if done is not None and remote and done.status == "running" and name in DEPLOYED:
                    cluster.teardown_leftovers(run, nodes, say)
                if done is not None and (moved := run.retire_stage(name)):
                    say(f"{name}: the unfinished attempt is kept as {moved}; running it again")
                if remote and name in CLUSTER_STEPS:
                    CLUSTER_STEPS[name](spec, run, nodes, say)
                else:
                    with run.stage(name) as stage:
                        local.run_stage(name, spec, stage.dir, say, node_rank)
        run.finish()
    except KeyboardInterrupt:
        run.finish("interrupted")
        _report(run, wanted, say)
        say(
            f"interrupted: everything gathered so far is in {run.path}; resume with --resume {run.path.name}"
        )
        raise
    except BaseException:
        run.finish("failed")
        _report(run, wanted, say)
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
    _report(run, wanted, say)
    return run


def _reach_nodes(spec: PocSpec, run: Run, nodes: Nodes | None, held, say: Say):
    """(the spec as its nodes run it, how the kit reaches them): on a cluster Slurm owns,
    the run's allocation (held by ``held`` until the stages end) and its nodes through job
    steps; else the given nodes, or the spec's own hosts or inventory."""
    if spec.cluster.scheduler == "slurm":
        made = held.enter_context(slurm.allocated(spec, run, say))
        inventory = made.inventory(run.path / "cluster" / "inventory.yml")
        reached = dataclasses.replace(nodes, inventory=inventory) if nodes else Nodes(inventory)
        return made.spec(spec), reached
    return spec, nodes or Nodes.from_spec(spec, run.path)


def _write_plan(spec: PocSpec, run: Run, say: Say) -> None:
    """The planner's prediction for the spec's layout, before anything is measured
    (``plan.json``; the dashboard sets it beside the measurements). A spec the planner
    cannot size runs all the same."""
    from pocforge.runner.plan import PlanError, plan_document

    try:
        run.write_json("plan.json", plan_document(spec))
    except PlanError as exc:
        say(f"plan: none ({exc})")
    except Exception as exc:  # the prediction is an aid: it must never stop a run
        say(f"plan: none ({type(exc).__name__}: {exc})")
    else:
        say(f"plan: {run.path / 'plan.json'}")


def _report(run: Run, wanted: list[str], say: Say) -> None:
    """The dashboard of whatever the run holds (also after a failure or an interrupt)."""
    if "report" not in wanted:
        return
    from pocforge.report.render import render

    try:
        say(f"report: {render(run.path)}")
    except Exception as exc:  # a report that cannot render must not hide the stage's error
        say(f"report: not rendered ({type(exc).__name__}: {exc})")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


__all__ = ["CLUSTER_STAGES", "LOCAL_STAGES", "NodeFailure", "Nodes", "RunnerError", "run_poc"]
