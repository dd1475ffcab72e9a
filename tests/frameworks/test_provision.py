"""What bring-up installs for a spec's runtimes: framework venvs from the kit's requirement
file for the GPU vendor, container images, and the kit's own wheels only where a runtime
is not the kit's."""

from __future__ import annotations

import shutil
import zipfile

import pytest

from pocforge.frameworks import LaunchContext
from pocforge.runtimes import RuntimeSpecError, plan_nodes
from pocforge.runtimes.provision import bringup_vars, kit_wheels, needs_kit_wheels
from pocforge.runtimes.resolve import resolve
from pocforge.spec import load_spec

from ..conftest import REPO

POCS = REPO / "pocs"


def test_deepspeed_on_mi300x_gets_a_rocm_venv_with_the_framework_at_the_specs_version():
    spec = load_spec(POCS / "llama-3-8b-bf16-mi300x-deepspeed" / "poc.yaml")
    out = bringup_vars(spec)
    (venv,) = out["python_env_venvs"]
    assert venv["python"] == "/opt/pocforge/venvs/deepspeed/bin/python" and venv["create"]
    requirements = venv["requirements"]
    assert requirements[0] == "--extra-index-url https://download.pytorch.org/whl/rocm6.4"
    assert requirements[-1] == f"deepspeed=={spec.training.version}"
    assert out["python_env_wheels_dir"] == "/opt/pocforge/wheels"
    assert out["container_image_images"] == []


def test_a_customers_interpreter_is_not_rebuilt_only_given_the_kit():
    spec = load_spec(POCS / "llama-3-8b-bf16-mi300x-deepspeed" / "poc.yaml")
    spec.training.runtime = spec.training.runtime.model_copy(
        update={"kind": "venv", "python": "/shared/conda/envs/ds/bin/python"}
    )
    (venv,) = bringup_vars(spec)["python_env_venvs"]
    assert venv == {
        "name": "deepspeed",
        "python": "/shared/conda/envs/ds/bin/python",
        "create": False,
        "requirements": [],
        "archive": None,
        "archive_key": None,
    }


def test_a_shipped_environment_is_unpacked_not_built_and_both_deployments_share_it(tmp_path):
    """runtime.venv_archive (a CPU node's, or nodes that reach no index): bring-up unpacks it
    where ``python`` says, once for serving and training; which archive, by size and time."""
    poc = tmp_path / "tiny-llama-2node-fp32-cpu-vllm"
    shutil.copytree(POCS / poc.name, poc)
    (poc / "env.tar.zst").write_bytes(b"x" * 10)
    spec = load_spec(poc / "poc.yaml")
    python = "/opt/pocforge/venvs/cpu/bin/python"
    for section in (spec.serving, spec.training):
        section.runtime = section.runtime.model_copy(
            update={"kind": "venv", "python": python, "venv_archive": "env.tar.zst"}
        )
    (venv,) = bringup_vars(spec)["python_env_venvs"]
    archive = poc / "env.tar.zst"
    assert venv == {
        "name": "vllm",
        "python": python,
        "create": True,
        "requirements": [],
        "archive": str(archive.resolve()),
        "archive_key": f"10-{archive.stat().st_mtime_ns}",
    }


@pytest.mark.parametrize(
    ("update", "field", "fix"),
    [
        (
            {"venv_archive": "env.tar.zst"},
            "serving.runtime.venv_archive",
            "set serving.runtime.kind: venv",
        ),
        ({"kind": "venv"}, "serving.runtime.python", "ship one with serving.runtime.venv_archive"),
    ],
)
def test_a_cpu_venv_needs_an_archive_or_an_interpreter(update, field, fix):
    spec = load_spec(POCS / "tiny-llama-2node-fp32-cpu-vllm" / "poc.yaml")
    spec.serving.runtime = spec.serving.runtime.model_copy(update=update)
    with pytest.raises(RuntimeSpecError) as raised:
        resolve(spec, "serving")
    assert str(raised.value).startswith(f"{field}:") and fix in str(raised.value)


def test_vllm_on_mi300x_pulls_its_rocm_image():
    spec = load_spec(POCS / "llama-3.1-70b-bf16-mi300x-vllm" / "poc.yaml")
    out = bringup_vars(spec)
    (image,) = out["container_image_images"]
    assert image["engine"] == "docker" and image["image"] == "vllm/vllm-openai-rocm:v0.27.1"
    assert image["archive"] is None
    assert out["python_env_venvs"] == [] and needs_kit_wheels(spec)


def test_the_cpu_rehearsal_needs_nothing_on_its_nodes_but_the_pocs_folder():
    spec = load_spec(POCS / "tiny-llama-2node-fp32-cpu-vllm" / "poc.yaml")
    assert bringup_vars(spec) == {
        "python_env_venvs": [],
        "container_image_images": [],
        "poc_folder_src": str((POCS / "tiny-llama-2node-fp32-cpu-vllm").resolve()),
        "poc_folder_dest": "/opt/pocforge/pocs/tiny-llama-2node-fp32-cpu-vllm",
    }
    assert not needs_kit_wheels(spec)


def test_training_in_a_container_installs_the_kits_driver_from_the_mounted_wheels():
    spec = load_spec(POCS / "llama-3-8b-bf16-mi300x-deepspeed" / "poc.yaml")
    spec.training.runtime = spec.training.runtime.model_copy(
        update={"kind": "container", "image": "rocm/megatron-lm:v25.9"}
    )
    launch = plan_nodes(spec, LaunchContext(repo=REPO))[0]
    script = launch.argv[launch.argv.index("-c") + 1]
    assert (
        "--find-links /opt/pocforge/wheels --target /tmp/pocforge-site pocforge pocforge-kernels"
        in script
    )
    assert "export PYTHONPATH=/tmp/pocforge-site" in script
    assert "/opt/pocforge/wheels:/opt/pocforge/wheels:ro" in launch.argv


@pytest.mark.process
def test_kit_wheels_are_built_once_per_source_state(tmp_path):
    """Same sources, same folder (so a second bring-up copies nothing); the wheels hold
    the node-side modules: the process manager and the training driver."""
    first = kit_wheels(tmp_path)
    assert kit_wheels(tmp_path) == first
    names = sorted(p.name for p in first.glob("*.whl"))
    assert names == ["pocforge-0.1.0-py3-none-any.whl", "pocforge_kernels-0.1.0-py3-none-any.whl"]
    with zipfile.ZipFile(first / names[0]) as wheel:
        members = set(wheel.namelist())
    assert {"pocforge/frameworks/process.py", "pocforge/training/driver.py"} <= members
    assert not (REPO / "common" / "build").exists()  # no build/ left in the checkout


def test_an_image_archive_comes_from_the_poc_folder_and_only_for_a_container():
    spec = load_spec(POCS / "llama-3.1-70b-bf16-mi300x-vllm" / "poc.yaml")
    spec.serving.runtime = spec.serving.runtime.model_copy(
        update={"image_archive": "images/rocm-vllm.tar"}
    )
    (image,) = bringup_vars(spec)["container_image_images"]
    # on the controller, beside the POC; bring-up copies it to a node that lacks the image
    folder = POCS / "llama-3.1-70b-bf16-mi300x-vllm"
    assert image["archive"] == str((folder / "images" / "rocm-vllm.tar").resolve())
    spec.serving.runtime = spec.serving.runtime.model_copy(update={"kind": "venv"})
    with pytest.raises(RuntimeSpecError, match=r"serving.runtime.image_archive: only a container"):
        bringup_vars(spec)


def test_a_container_launch_names_the_container_its_stop_removes():
    """The process manager removes a container launch's container when it stops it (a
    SIGKILLed ``docker run`` client would leave it running); a venv launch has none."""
    from pocforge.frameworks.launch_plan import container_of

    vllm = load_spec(POCS / "llama-3.1-70b-bf16-mi300x-vllm" / "poc.yaml")
    (launch,) = plan_nodes(vllm, LaunchContext(repo=REPO))
    assert container_of(launch) == (
        "docker",
        "pocforge-llama-3.1-70b-bf16-mi300x-vllm-serving-server-0",
    )
    deepspeed = load_spec(POCS / "llama-3-8b-bf16-mi300x-deepspeed" / "poc.yaml")
    assert container_of(plan_nodes(deepspeed, LaunchContext(repo=REPO))[0]) is None


def test_each_gpu_profiler_is_looked_for_where_its_launches_run_it():
    """nsys in a container runtime: in its image (the launch) and on the node (``nsys stats``
    sums each report there); rocprofv3 in the image; a venv runtime's on the node. Each
    names the spec field that asks for it."""
    pd = bringup_vars(load_spec(POCS / "llama-3.1-70b-fp8-h200-vllm-pd" / "poc.yaml"))
    in_image, on_node = pd["profiler_tools_checks"]
    assert in_image["tool"] == on_node["tool"] == "nsys"
    assert in_image["engine"] == "docker" and in_image["image"].startswith("vllm/vllm-openai:")
    assert on_node["image"] is None and "nsys stats" in on_node["purpose"]
    assert in_image["field"] == "serving.workloads[documents].profile.tool"
    sglang = bringup_vars(load_spec(POCS / "deepseek-v3-fp8-mi355x-sglang" / "poc.yaml"))
    (check,) = sglang["profiler_tools_checks"]
    assert check["tool"] == "rocprofv3" and check["image"].startswith("lmsysorg/sglang-rocm:")
    training = bringup_vars(load_spec(POCS / "llama-3-8b-bf16-mi300x-deepspeed" / "poc.yaml"))
    assert training["profiler_tools_checks"] == [
        {
            "tool": "rocprofv3",
            "engine": None,
            "image": None,
            "field": "training.profile.tool",
            "purpose": "the training launches run under it",
        }
    ]
    # torch's profiler (the demo's) needs nothing on the nodes
    assert "profiler_tools_checks" not in bringup_vars(load_spec(POCS / "demo" / "poc.yaml"))
