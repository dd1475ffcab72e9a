"""The platform's settings for every launch, one row each with its public source beside it.

What a vendor's documentation asks of a container (devices, groups, capabilities, ulimits,
IPC, network) by GPU vendor and container engine; what an RDMA fabric and a framework's own
image add; and the vendor-recommended environment of a training framework on a platform.
:func:`container_flags` and :func:`training_env` apply the rows; ``docs/launch-review.md``
reviews the launches they produce. The variables that depend on a node's own facts (device
visibility, ``NCCL_IB_HCA``, ``NCCL_IB_GID_INDEX``, ``NCCL_SOCKET_IFNAME``,
``UCX_NET_DEVICES``) are derived per node in :mod:`pocforge.runtimes.platform_env`, each
with its source there.

A row's ``when``:

- ``amd``, ``nvidia-docker``, ``nvidia-podman``: a container that uses the node's GPUs, by
  vendor (and engine: podman reaches NVIDIA GPUs through CDI, not ``--gpus``);
- ``image:<framework>``: that framework's own image documents it;
- ``rdma``: a deployment spanning nodes over RoCE or InfiniBand;
- ``all``: every container;
- ``<framework>:gpu``, ``<framework>:amd``, ``<framework>:<arch>``: training with that
  framework on any GPU, on AMD GPUs, on one GPU architecture.
"""

from __future__ import annotations

from dataclasses import dataclass

from pocforge.catalog import gpu


@dataclass(frozen=True)
class Setting:
    when: str
    flags: tuple[str, ...] = ()  # container run flags
    env: tuple[tuple[str, str], ...] = ()  # variables, in the order they are set
    source: str = ""


ROCM_DOCKER = "ROCm docs, 'Running ROCm Docker containers'"
AMD_VLLM = "AMD's vLLM-on-Instinct guides, 'Environment setup'"
PRIMUS = "AMD Primus README, 'How to Run' (release v25.10)"

CONTAINER: tuple[Setting, ...] = (
    Setting("amd", ("--device", "/dev/kfd", "--device", "/dev/dri"), source=f"{ROCM_DOCKER}: the GPU compute and render interfaces"),
    Setting("amd", ("--group-add", "video"), source=f"{ROCM_DOCKER}: the group that may open them"),
    Setting("amd", ("--cap-add", "SYS_PTRACE"), source=f"{AMD_VLLM}: ROCm's debugger and the HIP runtime"),
    Setting("amd", ("--security-opt", "seccomp=unconfined"), source=f"{ROCM_DOCKER}; {AMD_VLLM}"),
    Setting("nvidia-docker", ("--gpus", "all"), source="NVIDIA Container Toolkit; vLLM docs, 'Using Docker'"),
    Setting("nvidia-podman", ("--device", "nvidia.com/gpu=all"), source="NVIDIA Container Toolkit, 'Support for Container Device Interface' (podman 4.3 has no --gpus)"),
    Setting("image:trtllm", ("--ulimit", "memlock=-1", "--ulimit", "stack=67108864"), source="TensorRT-LLM docs, 'Run benchmarking with trtllm-serve' (pinned host memory for MPI and NCCL, the ranks' stack)"),
    Setting("rdma", ("--device", "/dev/infiniband"), source="AMD Primus's container script (multi-node): the verbs devices RCCL/NCCL and UCX open"),
    Setting("rdma", ("--ulimit", "memlock=-1"), source="RCCL/NCCL and UCX pin their buffers; NVIDIA's NCCL and TensorRT-LLM containers lift the limit"),
    Setting("all", ("--ipc", "host"), source="vLLM docs, 'Using Docker': ranks share tensors through the node's /dev/shm (no --shm-size: podman refuses it beside --ipc host)"),
    Setting("all", ("--network", "host"), source="the ranks, Ray, RCCL/NCCL and the benchmark reach the node's own addresses and ports"),
)  # fmt: skip

TRAINING_ENV: tuple[Setting, ...] = (
    Setting("megatron:gpu", env=(("CUDA_DEVICE_MAX_CONNECTIONS", "1"),), source="Megatron-LM's example scripts (examples/gpt3/train_gpt3_175b_distributed.sh): TP communication overlapped in order"),
    Setting("megatron:amd", env=(("HSA_NO_SCRATCH_RECLAIM", "1"), ("NVTE_CK_USES_BWD_V3", "1")), source=f"{PRIMUS}: set for every run"),
    Setting("megatron:gfx942", env=(("NVTE_CK_IS_V3_ATOMIC_FP32", "1"),), source=f"{PRIMUS}: 'only on MI300/MI325X'"),
)  # fmt: skip


def _flags(when: str) -> list[str]:
    return [flag for row in CONTAINER if row.when == when for flag in row.flags]


def container_flags(
    vendor: str, engine: str, framework: str, *, gpus: bool = True, rdma: bool = False
) -> list[str]:
    """A container's platform flags, in order: the GPUs' (``gpus``: the launch uses them),
    the framework image's own, the RDMA fabric's (``rdma``; ``memlock`` once where the
    image's rows already lift it), then every container's."""
    out = _flags("nvidia-podman" if vendor == "nvidia" and engine == "podman" else
                 "nvidia-docker" if vendor == "nvidia" else vendor) if gpus else []  # fmt: skip
    own = _flags(f"image:{framework}")
    out += own
    if rdma:
        for row in (row for row in CONTAINER if row.when == "rdma"):
            if not (row.flags[0] == "--ulimit" and row.flags[1] in own):
                out += row.flags
    return out + _flags("all")


def training_env(framework: str, gpu_name: str) -> dict[str, str]:
    """The vendor-recommended variables of training with ``framework`` on ``gpu_name``
    ({} on ``cpu``), in the table's order."""
    facts = gpu(gpu_name)
    if not facts.is_gpu:
        return {}
    wanted = {f"{framework}:gpu", f"{framework}:{facts.vendor}", f"{framework}:{facts.arch}"}
    return {name: value for row in TRAINING_ENV if row.when in wanted for name, value in row.env}
