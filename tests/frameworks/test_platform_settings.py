"""One table of platform settings, each row with its public source: the container flags by
vendor, engine, fabric and framework image, and the training frameworks' recipe variables."""

from __future__ import annotations

import pytest

from pocforge.frameworks.platform_settings import (
    CONTAINER,
    TRAINING_ENV,
    container_flags,
    training_env,
)


@pytest.mark.parametrize(
    "row", [*CONTAINER, *TRAINING_ENV], ids=lambda row: f"{row.when}:{row.flags or row.env}"
)
def test_every_row_names_its_public_source(row):
    assert len(row.source) > 20 and (row.flags or row.env)


def test_a_gpu_container_gets_its_vendors_flags_then_every_containers():
    amd = container_flags("amd", "docker", "vllm")
    assert amd[:4] == ["--device", "/dev/kfd", "--device", "/dev/dri"]
    assert amd[-4:] == ["--ipc", "host", "--network", "host"]
    assert container_flags("nvidia", "docker", "vllm")[:2] == ["--gpus", "all"]
    assert container_flags("nvidia", "podman", "vllm")[:2] == ["--device", "nvidia.com/gpu=all"]
    assert container_flags("amd", "docker", "vllm", gpus=False) == [
        "--ipc",
        "host",
        "--network",
        "host",
    ]


def test_the_rdma_fabric_lifts_memlock_once():
    across = container_flags("nvidia", "docker", "trtllm", rdma=True)
    assert across.count("memlock=-1") == 1 and "/dev/infiniband" in across
    assert container_flags("amd", "docker", "sglang", rdma=True).count("memlock=-1") == 1
    assert "/dev/infiniband" not in container_flags("amd", "docker", "sglang")


@pytest.mark.parametrize(
    ("gpu", "expected"),
    [
        ("MI300X", {"CUDA_DEVICE_MAX_CONNECTIONS", "HSA_NO_SCRATCH_RECLAIM", "NVTE_CK_USES_BWD_V3", "NVTE_CK_IS_V3_ATOMIC_FP32"}),
        ("MI355X", {"CUDA_DEVICE_MAX_CONNECTIONS", "HSA_NO_SCRATCH_RECLAIM", "NVTE_CK_USES_BWD_V3"}),
        ("H200", {"CUDA_DEVICE_MAX_CONNECTIONS"}),
        ("cpu", set()),
    ],
)  # fmt: skip
def test_megatron_gets_the_recipes_variables_of_its_platform(gpu, expected):
    assert set(training_env("megatron", gpu)) == expected
    assert training_env("deepspeed", gpu) == {}
