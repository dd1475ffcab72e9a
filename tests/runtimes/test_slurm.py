"""A POC on a cluster Slurm owns: one allocation for the run, each launch a job step on its
node of it (the node's docker on AMD sites, pyxis on NVIDIA ones), planned without node
names and given them once the allocation is held; the steps the kit starts on a node carry
none of this machine's environment."""

from __future__ import annotations

import pytest
import yaml
from click.testing import CliRunner
from pydantic import ValidationError

from pocforge.frameworks import LaunchContext
from pocforge.frameworks.launch_plan import NodeLaunch, on_node
from pocforge.runner.slurm import Allocation
from pocforge.runtimes import plan_nodes
from pocforge.runtimes.slurm import (
    allocation,
    enroot_uri,
    image_file,
    images,
    import_step,
    node_step,
)
from pocforge.spec import load_spec
from pocforge.spec.cluster_schema import ClusterSpec, Host

from ..conftest import REPO


def on_slurm(name: str, **slurm):
    """An example POC with its nodes owned by Slurm (no hosts, no inventory)."""
    spec = load_spec(REPO / "pocs" / name / "poc.yaml")
    cluster = spec.cluster.model_dump(exclude={"hosts", "inventory", "slurm"})
    spec.cluster = ClusterSpec.model_validate({**cluster, "scheduler": "slurm", "slurm": slurm})
    return spec


def plan(spec):
    return plan_nodes(spec, LaunchContext(repo=REPO, python="python", sglang_python="python"))


def test_the_slurm_section_belongs_to_a_slurm_cluster():
    with pytest.raises(ValidationError, match="cluster.scheduler is ssh: set scheduler: slurm"):
        ClusterSpec(gpu="H200", slurm={"partition": "gpu"})
    with pytest.raises(ValidationError, match="names 1 nodes but cluster.nodes is 2"):
        ClusterSpec(gpu="H200", nodes=2, scheduler="slurm", slurm={"nodelist": ["a"]})
    assert ClusterSpec(gpu="H200", scheduler="slurm").slurm.time_limit == "04:00:00"


def test_one_allocation_holds_the_runs_nodes():
    spec = on_slurm("llama-3.1-70b-fp8-mi355x-megatron", partition="mi355x", reservation="acme")
    assert allocation(spec) == [
        "salloc", "--no-shell", "--job-name=pocforge-llama-3.1-70b-fp8-mi355x-megatron",
        "--nodes=2", "--partition=mi355x", "--reservation=acme", "--time=04:00:00",
        "--exclusive", "--gpus-per-node=8",
    ]  # fmt: skip


def test_amd_launches_are_steps_running_the_nodes_docker():
    """Each node's docker run inside a step on its node of the allocation (by rank), the
    rendezvous at the allocation's first node, no inventory host."""
    spec = on_slurm("llama-3.1-70b-fp8-mi355x-megatron")
    launches = plan(spec)
    assert [one.node_rank for one in launches] == [0, 1]
    for one in launches:
        step = one.argv[: one.argv.index("docker")]
        assert step[:6] == [
            "srun", "--jobid={slurm_job}", "--nodes=1", "--ntasks=1",
            f"--relative={one.node_rank}", "--overlap",
        ]  # fmt: skip
        assert "--master_addr={slurm_node0}" in one.argv and "--device" in one.argv
        assert one.host == f"{{slurm_node{one.node_rank}}}"
    assert images(launches) == []


def test_nvidia_launches_run_in_pyxis_with_the_images_import_first():
    """The P/D pair on one H200 node: the image imported once per node under flock; each
    instance a pyxis step with its GPUs asked of Slurm, its mounts and its variables."""
    spec = on_slurm("llama-3.1-70b-fp8-h200-vllm-pd", partition="h200")
    launches = plan(spec)
    (image,) = images(launches)
    assert image == "vllm/vllm-openai:v0.31.0"
    assert import_step(spec, image)[-3:] == [
        "sh",
        "-c",
        "mkdir -p /opt/pocforge/images && test -f /opt/pocforge/images/vllm+vllm-openai+v0.31.0.sqsh"
        " || enroot import --output /opt/pocforge/images/vllm+vllm-openai+v0.31.0.sqsh "
        "docker://vllm/vllm-openai:v0.31.0",
    ]
    prefill = next(one for one in launches if one.role == "prefill")
    assert "docker" not in prefill.argv and "CUDA_VISIBLE_DEVICES" not in prefill.env
    flags = {
        part.split("=", 1)[0]: part.partition("=")[2]
        for part in prefill.argv
        if part.startswith("--")
    }
    assert flags["--gpus"] == "2" and flags["--container-image"] == image_file(image)
    assert "/opt/pocforge/hf-home:/opt/pocforge/hf-home" in flags["--container-mounts"].split(",")
    named = flags["--container-env"].split(",")
    assert "HF_TOKEN" in named and "VLLM_NIXL_SIDE_CHANNEL_HOST" in named
    assert prefill.env["VLLM_NIXL_SIDE_CHANNEL_HOST"] == "{slurm_node0}"
    assert "--no-container-mount-home" in prefill.argv


@pytest.mark.parametrize(
    ("image", "uri"),
    [
        (
            "nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc14",
            "docker://nvcr.io#nvidia/tensorrt-llm/release:1.3.0rc14",
        ),
        ("vllm/vllm-openai:v0.31.0", "docker://vllm/vllm-openai:v0.31.0"),
        ("docker.io/rocm/primus:v26.9", "docker://docker.io#rocm/primus:v26.9"),
    ],
)
def test_enroot_writes_a_registry_apart(image, uri):
    assert enroot_uri(image) == uri


def test_a_slurm_poc_runs_only_where_slurm_answers(tmp_path, monkeypatch):
    """`pocforge run` on a Slurm POC where this machine has no Slurm client: one line saying
    so, no traceback; the cluster verbs, one stage at a time over SSH, send it to `run`."""
    from pocforge.cli import main

    folder = tmp_path / "llama-3.1-70b-fp8-mi355x-megatron"
    source = REPO / "pocs" / folder.name
    folder.mkdir()
    text = (
        (source / "poc.yaml")
        .read_text()
        .replace("  inventory: inventory/hosts.yml\n", "  scheduler: slurm\n")
    )
    (folder / "poc.yaml").write_text(text)
    monkeypatch.setenv("PATH", str(tmp_path / "no-slurm-here"))
    monkeypatch.setenv("POCFORGE_RESULTS", str(tmp_path / "results"))
    done = CliRunner().invoke(main, ["run", str(folder)])
    assert done.exit_code == 1 and "Traceback" not in done.output
    assert "salloc: No such file or directory (is Slurm's client here?)" in done.output
    done = CliRunner().invoke(main, ["cluster", "up", str(folder)])
    assert done.exit_code == 2 and "a Slurm POC runs its stages in one allocation" in done.output


def test_a_node_step_carries_a_login_environment_not_this_machines(monkeypatch):
    monkeypatch.delenv("SLURM_CONF", raising=False)
    monkeypatch.setenv("VIRTUAL_ENV", "/work/main/.venv")
    step = node_step("42")
    exported = next(a for a in step if a.startswith("--export="))
    assert step[:2] == ["srun", "--jobid=42"] and "--overlap" in step
    assert "VIRTUAL_ENV" not in exported and ".venv" not in exported
    assert exported.startswith("--export=PATH=/usr/local/sbin:") and "SLURM_OVERLAP=1" in exported
    monkeypatch.setenv("SLURM_CONF", "/etc/site/slurm.conf")  # a site's own configuration
    assert next(a for a in node_step("42") if a.startswith("--export=")).endswith(",SLURM_CONF")


def test_a_held_allocation_names_the_nodes_of_the_plan_and_its_inventory(tmp_path):
    spec = load_spec(REPO / "pocs" / "deepseek-v3-fp8-mi355x-sglang-slurm" / "poc.yaml")
    held = Allocation(
        "7", [Host(name="gpu-a1", address="10.1.0.1"), Host(name="gpu-a2", address="10.1.0.2")]
    )
    before = plan(spec)
    assert any("{slurm_node0}" in " ".join(one.argv) + str(one.health_url) for one in before)
    after = plan(held.spec(spec))
    text = " ".join(" ".join(one.argv) + str(one.env) + str(one.health_url) for one in after)
    assert "{slurm_node" not in text and "10.1.0.1" in text
    inventory = yaml.safe_load(held.inventory(tmp_path / "inventory.yml").read_text())["all"]
    assert inventory["hosts"] == {
        "gpu-a1": {"ansible_host": "gpu-a1"},
        "gpu-a2": {"ansible_host": "gpu-a2"},
    }
    assert inventory["vars"]["ansible_connection"] == "srun"
    assert inventory["vars"]["pocforge_slurm_step"][:2] == ["srun", "--jobid=7"]


def test_a_launch_takes_its_job_id_from_the_step_it_runs_in(monkeypatch):
    launch = NodeLaunch(
        "serving", "vllm", 1, "n", "server", ["srun", "--jobid={slurm_job}", "--relative=1", "vllm"]
    )
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    assert on_node(launch, "/w").argv[1] == "--jobid={slurm_job}"  # launch --print, here
    monkeypatch.setenv("SLURM_JOB_ID", "314")
    assert on_node(launch, "/w").argv[1] == "--jobid=314"  # the node's launcher, in a step
