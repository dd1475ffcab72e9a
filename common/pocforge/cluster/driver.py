"""Run one playbook through ansible-runner and keep everything it produced.

Layout of ``<run_dir>/cluster/``::

    ansible/<playbook>/      ansible-runner artifacts (stdout, job_events/, rc, status)
    <playbook>.json          per-host status and check records (ClusterResult.to_dict())
    facts/<host>.json        the probe roles' facts, for the report's provenance
    health.json              host x check matrix (ClusterHealth), with run_playbook_stage()

``run_playbook_stage`` runs a playbook as a stage of a results-store run (``RunStore().create(spec)``)
and writes the documents the dashboard reads: ``cluster/health.json``, one
``collectives/*.json`` per collective run (and per node's expert-parallel benchmark run),
and the hosts' facts in ``provenance.json``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from pocforge import atomic
from pocforge.cluster.events import ClusterResult, EventCollector
from pocforge.cluster.expectations import ClusterExpectations
from pocforge.cluster.known_hosts import explain, fingerprints
from pocforge.cluster.records import (
    write_collectives,
    write_ep_alltoall,
    write_health,
    write_provenance,
)
from pocforge.paths import playbooks_dir

PLAYBOOKS = {
    "up": "bringup.yml",
    "check": "preflight.yml",
    "collectives": "collectives.yml",
    "serve": "serve.yml",
    "train": "train.yml",
    "collect": "collect.yml",
    "profile": "profile.yml",
    "down": "teardown.yml",
}


class ClusterError(RuntimeError):
    """Bad input to the driver (missing inventory or playbook): one clear line."""


def _ansible_playbook() -> str:
    beside = Path(sys.executable).parent / "ansible-playbook"
    found = str(beside) if beside.exists() else shutil.which("ansible-playbook")
    if not found:
        raise ClusterError("ansible-playbook not found (pip install ansible-core ansible-runner)")
    return found


def run_playbook(
    playbook: str,
    inventory: Path,
    run_dir: Path,
    expectations: ClusterExpectations | None = None,
    *,
    limit: str | None = None,
    extravars: dict | None = None,
    on_change: Callable[[ClusterResult], None] | None = None,
    forks: int | None = None,
) -> ClusterResult:
    """Run ``playbook`` (a file in ``playbooks/``) and return the per-host results.

    Hosts run in parallel; an unreachable or failing host does not stop the others.
    """
    import ansible_runner

    project = playbooks_dir()
    if not (project / playbook).is_file():
        raise ClusterError(f"no playbook {playbook} in {project}")
    inventory = Path(inventory).resolve()
    if not inventory.exists():
        raise ClusterError(f"inventory {inventory} does not exist")
    out_dir = Path(run_dir) / "cluster"
    ident = Path(playbook).stem
    (out_dir / "ansible").mkdir(parents=True, exist_ok=True)
    shutil.rmtree(out_dir / "ansible" / ident, ignore_errors=True)
    variables = {**(expectations.extravars() if expectations else {}), **(extravars or {})}
    collector = EventCollector(playbook, on_change)
    binary = _ansible_playbook()
    envvars = {
        "PATH": f"{Path(binary).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "ANSIBLE_CONFIG": str(project / "ansible.cfg"),
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_NOCOLOR": "1",
    }
    # ansible-runner starts "ansible-playbook" from PATH: make it the one beside this Python.
    if shutil.which("ansible-playbook") != binary:
        os.environ["PATH"] = envvars["PATH"]
    with tempfile.TemporaryDirectory(prefix="pocforge-runner-") as private:
        runner = ansible_runner.run(
            private_data_dir=private,
            project_dir=str(project),
            playbook=playbook,
            inventory=str(inventory),
            extravars=variables,
            limit=limit,
            forks=forks,
            envvars=envvars,
            artifact_dir=str(out_dir / "ansible"),
            ident=ident,
            event_handler=collector,
            quiet=True,
            json_mode=False,
        )
    result = collector.result
    result.rc, result.status = runner.rc, runner.status
    _explain_host_keys(result, variables)
    result.artifacts = str(out_dir / "ansible" / ident)
    if runner.status not in ("successful", "failed") and not result.hosts:
        raise ClusterError(
            f"ansible-playbook did not run ({runner.status}, rc={runner.rc}); "
            f"see {result.artifacts}/stdout"
        )
    _save(result, out_dir, ident)
    return result


def run_playbook_stage(
    run,
    playbook: str,
    inventory: Path,
    expectations: ClusterExpectations | None = None,
    **kwargs,
) -> ClusterResult:
    """Run ``playbook`` as a stage of ``run`` (a ``pocforge.results.store.Run``).

    The stage is ``collectives`` for collectives.yml (its tables in ``collectives/``) and
    ``cluster`` for the others; failed checks are data (the stage completes), a playbook
    that could not run at all fails the stage. Keyword arguments go to ``run_playbook``.
    """
    name = "collectives" if Path(playbook).name == PLAYBOOKS["collectives"] else "cluster"
    with run.stage(name) as stage:
        result = run_playbook(playbook, inventory, run.path, expectations, **kwargs)
        if name == "collectives":
            # the stored reference is exactly the one the playbook judged against
            reference = expectations.collective_reference if expectations else None
            write_collectives(stage, result, reference)
            write_ep_alltoall(stage, result)  # before the health matrix: it adds failed runs
        if any(host.checks for host in result.hosts.values()):
            write_health(run, result, name)
        write_provenance(run, result)
        if "ansible_ssh_common_args" in (kwargs.get("extravars") or {}):
            write_known_hosts(run, kwargs["extravars"])
        run.adopt("cluster", stage=name)
    return result


def known_hosts_of(variables: dict) -> Path | None:
    """The known-hosts file the SSH policy variables name (None: checking is off)."""
    found = re.search(
        r"UserKnownHostsFile=(\S+)", str(variables.get("ansible_ssh_common_args", ""))
    )
    return Path(found[1]) if found and found[1] != "/dev/null" else None


def _explain_host_keys(result: ClusterResult, variables: dict) -> None:
    """A host OpenSSH refused over its host key gets the one line that says so and how."""
    path = known_hosts_of(variables)
    for name, host in result.hosts.items():
        line = explain(host.error, name, path) if host.status == "unreachable" else None
        if line:
            host.error = line
            if "reachable" in host.checks:
                host.checks["reachable"].message = f"reachable: {line}"


def write_known_hosts(run, variables: dict) -> None:
    """The host-key policy this playbook ran with and the fingerprints it knows, in the run."""
    path = known_hosts_of(variables)
    record = {
        "host_key_checking": bool(variables.get("ansible_host_key_checking", True))
        and path is not None,
        "known_hosts": str(path) if path else None,
        "fingerprints": [f.model_dump() for f in fingerprints(path)],
    }
    run.write_json("cluster/known_hosts.json", record)


def _save(result: ClusterResult, out_dir: Path, ident: str) -> None:
    atomic.write_text(
        out_dir / f"{ident}.json", json.dumps(result.to_dict(), indent=2, default=str)
    )
    facts_dir = out_dir / "facts"
    facts_dir.mkdir(exist_ok=True)
    for name, host in result.hosts.items():
        if host.facts:
            path = facts_dir / f"{name}.json"
            merged = json.loads(path.read_text()) if path.exists() else {}
            merged.update(host.facts)
            atomic.write_text(path, json.dumps(merged, indent=2, sort_keys=True, default=str))


def dry_run(playbook: str, inventory: str | Path, limit: str | None = None) -> str:
    """The hosts and the ordered tasks ``playbook`` would run on ``inventory`` (Ansible's
    ``--list-hosts --list-tasks``): nothing connects to a node. Tasks a variable switches
    off are listed too, their ``when`` being decided on the node."""
    project = playbooks_dir()
    if not (project / playbook).is_file():
        raise ClusterError(f"no playbook {playbook} in {project}")
    argv = [_ansible_playbook(), "--list-hosts", "--list-tasks", "-i", str(inventory),
            str(project / playbook)]  # fmt: skip
    if limit:
        argv += ["--limit", limit]
    env = {**os.environ, "ANSIBLE_CONFIG": str(project / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=project)
    if done.returncode != 0:
        tail = (done.stderr.strip() or done.stdout.strip()).splitlines()[-3:]
        raise ClusterError(f"ansible-playbook --list-tasks {playbook}: {' '.join(tail)}")
    return done.stdout
