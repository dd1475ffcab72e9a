"""Runtimes: defaults per GPU vendor and framework, and the errors a wrong one gets."""

from __future__ import annotations

import pytest

from pocforge.frameworks import LaunchContext
from pocforge.runtimes import RuntimeSpecError, plan_nodes, resolve
from pocforge.spec import load_spec

from ..conftest import REPO

POCS = REPO / "pocs"


def _spec(name: str, **runtime):
    spec = load_spec(POCS / name / "poc.yaml")
    section = spec.serving or spec.training
    section.runtime = section.runtime.model_copy(update=runtime)
    return spec


def test_defaults_by_vendor_and_framework():
    """GPU serving runs in the vendor's container, DeepSpeed in a bring-up venv, cpu in the kit."""
    vllm = resolve(_spec("llama-3.1-70b-bf16-mi300x-vllm"), "serving")
    assert (vllm.kind, vllm.vendor, vllm.node_python) == ("container", "amd", "python3")
    ds = resolve(_spec("llama-3-8b-bf16-mi300x-deepspeed"), "training")
    assert (ds.kind, ds.node_python) == ("venv", "/opt/pocforge/venvs/deepspeed/bin/python")
    assert resolve(load_spec(POCS / "demo" / "poc.yaml"), "serving").kind == "kit"


def test_a_customer_image_and_engine_are_used_as_given():
    spec = _spec(
        "llama-3.1-70b-bf16-mi300x-vllm", image="registry.customer/vllm:7", engine="podman"
    )
    (launch,) = plan_nodes(spec, LaunchContext(repo=REPO))
    assert launch.argv[:2] == ["podman", "run"] and "registry.customer/vllm:7" in launch.argv


@pytest.mark.parametrize(
    ("name", "update", "message"),
    [
        (
            "llama-3.1-70b-bf16-mi300x-vllm",
            {"kind": "kit"},
            r"serving\.runtime\.kind: kit .* cpu only",
        ),
        (
            "llama-3-8b-bf16-mi300x-deepspeed",
            {"kind": "container"},
            r"training\.runtime\.image: the kit has no default deepspeed image",
        ),
    ],
)
def test_impossible_runtimes_are_refused_naming_the_field(name, update, message):
    with pytest.raises(RuntimeSpecError, match=message):
        plan_nodes(_spec(name, **update), LaunchContext(repo=REPO))


def test_a_venv_interpreter_the_customer_names_starts_the_framework():
    spec = _spec(
        "llama-3.1-70b-bf16-mi300x-vllm", kind="venv", python="/shared/envs/vllm/bin/python"
    )
    (launch,) = plan_nodes(spec, LaunchContext(repo=REPO))
    assert launch.argv[0] == "/shared/envs/vllm/bin/python" and launch.runtime["kind"] == "venv"


@pytest.mark.parametrize(
    ("name", "rdma"),
    [
        ("deepseek-v3-fp8-mi355x-sglang", True),  # 2 nodes over RoCE
        ("llama-3.1-70b-fp8-mi355x-megatron", True),  # training too
        ("llama-3.1-70b-bf16-mi300x-vllm", False),  # one node
        ("llama-3.1-70b-fp8-h200-vllm-pd", False),  # one node: NIXL within it
    ],
)
def test_a_deployment_across_an_rdma_fabric_gets_the_verbs_devices_and_memlock(name, rdma):
    """RCCL/NCCL and UCX between nodes open /dev/infiniband and pin their buffers: a
    container without the devices falls back to TCP or fails to register memory."""
    launches = plan_nodes(load_spec(REPO / "pocs" / name / "poc.yaml"), LaunchContext(repo=REPO))
    for launch in launches:
        argv = launch.argv
        pairs = list(zip(argv, argv[1:], strict=False))
        assert (("--device", "/dev/infiniband") in pairs) is rdma, (name, launch.role)
        assert pairs.count(("--ulimit", "memlock=-1")) == (1 if rdma else 0), (name, launch.role)


def test_memlock_is_set_once_where_the_framework_sets_it_already():
    from pocforge.frameworks.base import NodeLaunch
    from pocforge.runtimes.container import wrap
    from pocforge.runtimes.resolve import ResolvedRuntime

    runtime = ResolvedRuntime(kind="container", framework="trtllm", vendor="nvidia",
                              arch="sm90", image="nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc14")  # fmt: skip
    launch = NodeLaunch(deployment="serving", framework="trtllm", node_rank=0, host="h",
                        role="server", argv=["trtllm-serve", "m"])  # fmt: skip
    argv = wrap(launch, runtime, poc="p", mounts=[], kernels=False, rdma=True).argv
    assert argv.count("memlock=-1") == 1 and "/dev/infiniband" in argv


@pytest.mark.parametrize(
    "name", ["llama-3.1-70b-fp8-h200-vllm-pd", "deepseek-r1-fp8-mi355x-sglang-pd"]
)
def test_the_pd_router_container_gets_no_gpu_model_or_fabric(name):
    """The kit's P/D router only forwards requests: no GPU devices, no model cache, no
    verbs devices, only the kit's wheels it installs itself from."""
    launches = plan_nodes(load_spec(REPO / "pocs" / name / "poc.yaml"), LaunchContext(repo=REPO))
    (router,) = [launch for launch in launches if launch.role == "router"]
    argv = router.argv
    assert not {"--gpus", "/dev/kfd", "/dev/infiniband", "memlock=-1"} & set(argv)
    volumes = [argv[i + 1] for i, part in enumerate(argv) if part == "--volume"]
    assert volumes == ["/opt/pocforge/wheels:/opt/pocforge/wheels:ro"]
    assert "HF_HOME" not in router.runtime["env"]
    servers = [launch for launch in launches if launch.role != "router"]
    assert all("--gpus" in s.argv or "/dev/kfd" in s.argv for s in servers)
