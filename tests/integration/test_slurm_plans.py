"""The example Slurm POCs' allocations judged by a real Slurm (Debian's slurm-wlm, a slurmd
in each of two namespaced nodes with fake GPUs): what `pocforge launch --print` asks of a
site is what Slurm grants, and what it cannot grant is refused in Slurm's own words."""

from __future__ import annotations

import pytest

from pocforge.rehearse.nodes import missing_prerequisites, running_cluster
from pocforge.rehearse.slurm import SlurmCluster, missing_daemons
from pocforge.runtimes.slurm import allocation
from pocforge.spec import load_spec

from ..conftest import REPO

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        bool(missing_prerequisites() or missing_daemons()),
        reason=str(missing_prerequisites() or missing_daemons()),
    ),
]

SLURM_POCS = ("deepseek-v3-fp8-mi355x-sglang-slurm", "llama-3.1-70b-fp8-h200-trtllm-slurm")


def poc(name: str):
    return load_spec(REPO / "pocs" / name / "poc.yaml")


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    partitions = tuple(poc(name).cluster.slurm.partition for name in SLURM_POCS)
    with running_cluster(tmp_path_factory.mktemp("netns"), 2) as nodes:
        made = SlurmCluster(nodes, tmp_path_factory.mktemp("slurm"), partitions=partitions)
        try:
            yield made.start()
        finally:
            made.close()


@pytest.mark.budget(60, "two namespaced nodes, munged, slurmctld and two slurmd")
@pytest.mark.parametrize("name", SLURM_POCS)
def test_slurm_grants_each_example_pocs_allocation(slurm, name):
    spec = poc(name)
    granted, said = slurm.test_only(allocation(spec))
    assert granted, said
    nodes = "h[1-2]" if spec.cluster.nodes == 2 else "h1"
    assert f"on nodes {nodes} in partition {spec.cluster.slurm.partition}" in said


def test_what_a_site_cannot_grant_is_refused_in_slurms_words(slurm):
    spec = poc("deepseek-v3-fp8-mi355x-sglang-slurm")
    wider = [part.replace("--nodes=2", "--nodes=3") for part in allocation(spec)]
    assert slurm.test_only(wider) == (
        False,
        "allocation failure: Requested node configuration is not available",
    )
    elsewhere = [
        part.replace("--partition=mi355x", "--partition=mi300x") for part in allocation(spec)
    ]
    granted, said = slurm.test_only(elsewhere)
    assert not granted and "Invalid partition name specified" in said


def test_a_queued_allocation_waits_and_ctrl_c_cancels_it(slurm):
    """Both nodes held by another job: the run's salloc is queued and says so; Ctrl-C then
    cancels the queued job (salloc's own SIGINT), and only the other job is left."""
    import re
    import signal
    import subprocess
    import sys

    held = slurm.client("salloc", "--no-shell", "--nodes=2", "--exclusive", "--job-name=other")
    other = re.search(r"allocation (\d+)", held.stderr).group(1)
    try:
        code = (
            "from pocforge.runner.slurm import salloc\n"
            "salloc(['salloc', '--no-shell', '--nodes=2', '--exclusive', '--job-name=run'], print)"
        )
        run = subprocess.Popen(
            [sys.executable, "-u", "-c", code],
            env=slurm.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert run.stdout is not None
        line = run.stdout.readline()  # '' if the child ended: its stderr says why
        assert "is queued; waiting for Slurm to grant it" in line, line or run.stderr.read()
        queued = slurm.client("squeue", "--noheader", "--format=%j %T").stdout.split("\n")
        assert "run PENDING" in queued, queued
        run.send_signal(signal.SIGINT)
        assert run.wait(timeout=30) != 0
        left = slurm.client("squeue", "--noheader", "--format=%i %j").stdout.split()
        assert left == [other, "other"], left
    finally:
        slurm.client("scancel", other)


def test_a_resumed_run_first_releases_what_a_killed_attempt_left(slurm, tmp_path, monkeypatch):
    """An attempt killed outright never ran its scancel: its job still holds both nodes
    (--exclusive), and a new allocation would queue behind it until its time limit. The
    next attempt of the run releases it first, then takes its own; both are recorded."""
    import json

    from pocforge.results.store import RunStore
    from pocforge.runner.slurm import allocated, salloc

    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    spec = poc("deepseek-v3-fp8-mi355x-sglang-slurm")
    run = RunStore(tmp_path / "results").create(spec, provenance=False)
    argv = allocation(spec)
    left = salloc(argv, print)
    run.write_json("cluster/slurm.json", [{"job": left, "salloc": argv, "granted": "before"}])
    said: list[str] = []
    with allocated(spec, run, said.append) as made:
        assert made.job != left
        listed = slurm.client("squeue", "--noheader", "--format=%i").stdout.split()
        assert listed == [made.job], (listed, said)
    assert slurm.client("squeue", "--noheader").stdout.strip() == ""
    history = json.loads((run.path / "cluster" / "slurm.json").read_text())
    assert [one["job"] for one in history] == [left, made.job]
    assert all("released" in one for one in history)
    assert any("earlier attempt still holds its nodes" in line for line in said), said
