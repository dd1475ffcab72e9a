"""A run on a cluster Slurm owns: one allocation holds the nodes for every stage.

:func:`allocated` takes the allocation (``salloc --no-shell``, as
:func:`pocforge.runtimes.slurm.allocation` writes it), learns the nodes Slurm gave (names,
and the addresses their launches and the benchmark use), and hands the stages a spec whose
hosts are those nodes and an inventory that reaches them through job steps (the playbooks'
``srun`` connection). The job id, the nodes and how the job ended are the run's
``cluster/slurm.json``, one entry per allocation (a resumed run takes another). The allocation is released (``scancel``) when the stages end, also
on failure and Ctrl-C, and the run waits until Slurm no longer lists the job; ``--resume``
takes a new one.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import yaml

from pocforge.cluster.slurm_client import CLIENT_TIMEOUT_S, SlurmError, client, fields
from pocforge.runner.cluster import NodeFailure
from pocforge.runtimes.slurm import allocation, job_name, node_step
from pocforge.spec import PocSpec
from pocforge.spec.cluster_schema import Host

Say = Callable[[str], None]
GONE_TIMEOUT_S = 120  # scancel to no step left: KillWait (30 s by default) and the epilog
_GRANTED = re.compile(r"job allocation (\d+)")


@dataclass
class Allocation:
    job: str
    nodes: list[Host]  # in Slurm's order: node rank = index

    def spec(self, spec: PocSpec) -> PocSpec:
        """``spec`` with the allocation's nodes as its hosts."""
        cluster = spec.cluster.model_copy(update={"hosts": list(self.nodes)})
        return spec.model_copy(update={"cluster": cluster})

    def inventory(self, dest: Path) -> Path:
        """The nodes, reached through job steps of this allocation. Each is named and
        addressed as Slurm names it (a node's name resolves on the cluster's nodes; the
        addresses the controller uses are the spec's hosts, :meth:`spec`)."""
        hosts = {node.name: {"ansible_host": node.name} for node in self.nodes}
        common = {
            "ansible_connection": "srun",
            "ansible_python_interpreter": "/usr/bin/python3",
            "pocforge_slurm_job": self.job,
            "pocforge_slurm_step": node_step(self.job),
            "pocforge_become": False,  # a step runs as the user who holds the allocation
            # the controller's side of the steps that outlive a task (the serving launcher)
            "pocforge_slurm_logs": str(dest.parent / "steps"),
            # mpirun's daemons on the other nodes as job steps (its Slurm launcher), its
            # ranks where -H puts them, not the one-node step it runs in
            "collectives_mpirun_launcher_args": "--mca ras ^slurm --mca plm slurm",
        }
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(yaml.safe_dump({"all": {"hosts": hosts, "vars": common}}, sort_keys=False))
        return dest


def salloc(argv: list[str], say: Say) -> str:
    """Run ``salloc --no-shell`` until Slurm grants the job (a queue may hold it); its id.
    Ctrl-C while it waits cancels the pending job, as salloc does on SIGINT."""
    try:
        process = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
    except OSError as exc:
        raise SlurmError(f"{argv[0]}: {exc.strerror or exc} (is Slurm's client here?)") from None
    said: list[str] = []
    job = None
    try:
        assert process.stdout is not None
        for line in process.stdout:
            said.append(line.rstrip())
            if match := _GRANTED.search(line):
                job = match.group(1)
                if "Pending" in line:
                    say(f"slurm: job {job} is queued; waiting for Slurm to grant it")
        code = process.wait()
    except KeyboardInterrupt:
        process.send_signal(signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=CLIENT_TIMEOUT_S)
        if job is not None:
            client("scancel", job)
        raise
    if code != 0 or job is None:
        raise SlurmError(f"salloc refused the allocation: {' | '.join(said) or f'exit {code}'}")
    return job


def _nodes(job: str) -> list[Host]:
    shown = client("scontrol", "show", "job", job)
    if shown.returncode != 0:
        raise SlurmError(f"scontrol show job {job}: {shown.stderr.strip()}")
    listed = fields(shown.stdout).get("NodeList", "")
    names = client("scontrol", "show", "hostnames", listed).stdout.split()
    if not names:
        raise SlurmError(f"job {job} holds no nodes (NodeList={listed!r})")
    nodes = []
    for name in names:
        node = fields(client("scontrol", "show", "node", name).stdout)
        nodes.append(Host(name=name, address=node.get("NodeAddr") or name))
    return nodes


def release(job: str, say: Say) -> str:
    """``scancel`` the job and wait until Slurm no longer lists it; how it ended."""
    state = fields(client("scontrol", "show", "job", job).stdout).get("JobState", "unknown")
    client("scancel", job)
    deadline = time.monotonic() + GONE_TIMEOUT_S
    while time.monotonic() < deadline:
        listed = client("squeue", "--noheader", "--jobs", job, "--format=%T")
        if listed.returncode != 0 or not listed.stdout.strip():
            say(f"slurm: job {job} released")
            return state
        time.sleep(0.5)
    say(f"slurm: job {job} is still listed {GONE_TIMEOUT_S} s after scancel; check squeue")
    return state


def _release_left(history: list[dict], name: str, run, say: Say) -> None:
    """An allocation an earlier attempt of this run never released (it was killed outright,
    SIGKILL or a lost login node, so its ``finally`` never ran) still holds the nodes until
    its time limit, and a new one for the same nodes would queue behind it: release it
    first, if Slurm still lists it under the run's job name ``name``."""
    left = [old for old in history if "released" not in old]
    for old in left:
        shown = fields(client("scontrol", "show", "job", old["job"]).stdout)
        if shown.get("JobName") == name:
            say(
                f"slurm: job {old['job']} of an earlier attempt still holds its nodes; releasing it"
            )
            old["state_at_release"] = release(old["job"], say)
        old["released"] = datetime.now(UTC).isoformat()
    if left:
        run.write_json("cluster/slurm.json", history)


@contextlib.contextmanager
def allocated(spec: PocSpec, run, say: Say) -> Iterator[Allocation]:
    """The run's allocation for the duration of the block, recorded in the run as soon as
    Slurm grants it and released after the block, whatever ends it."""
    path = run.path / "cluster" / "slurm.json"
    history = json.loads(path.read_text()) if path.exists() else []
    argv = allocation(spec)
    try:
        _release_left(history, job_name(spec), run, say)
        say(f"slurm: {' '.join(argv)}")
        job = salloc(argv, say)
    except SlurmError as exc:
        raise NodeFailure(f"slurm: {exc}") from None
    record: dict = {"job": job, "salloc": argv, "granted": datetime.now(UTC).isoformat()}
    run.write_json("cluster/slurm.json", [*history, record])  # a kill from here on: found
    try:
        try:
            made = Allocation(job, _nodes(job))
        except SlurmError as exc:
            raise NodeFailure(f"slurm: job {job}: {exc}") from None
        record["nodes"] = [{"name": n.name, "address": n.address} for n in made.nodes]
        run.write_json("cluster/slurm.json", [*history, record])
        say(f"slurm: job {job} on {', '.join(n.name for n in made.nodes)}")
        yield made
    finally:
        try:
            record["state_at_release"] = release(job, say)
        except SlurmError as exc:
            say(f"slurm: job {job} may still hold its nodes ({exc}): scancel {job}")
        record["released"] = datetime.now(UTC).isoformat()
        run.write_json("cluster/slurm.json", [*history, record])
