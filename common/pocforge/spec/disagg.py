"""Disaggregated serving, KV offload and the MoE all-to-all backend of a serving deployment.

- ``serving.disaggregation``: prefill and decode pools, each with its own instance count and
  layout, the KV connector between them (vLLM's ``--kv-transfer-config``, SGLang's
  ``--disaggregation-transfer-backend``) and the router in front; the load generator talks
  to the router only;
- ``serving.kv_offload``: the engine's own second cache tier in host memory (vLLM's
  ``--kv-offloading-backend/--kv-offloading-size``, SGLang's HiCache);
- ``serving.parallelism.all2all_backend``: vLLM's ``--all2all-backend`` or SGLang's
  ``--moe-a2a-backend`` (with ``deepep_mode``) for expert parallelism.

The values are the frameworks' own (vLLM 0.32's ``KVConnectorFactory`` names and
``All2AllBackend``, SGLang 0.5.23's ``DISAGG_TRANSFER_BACKEND_CHOICES`` and
``moe_a2a_backend`` choices); which of them fits which framework and GPU is a cross-field
rule (``spec/rules.py``), checked again by each framework's parser on the rendered launch.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from pocforge.spec.values import EngineArg

# vLLM's KV connectors a POC may name (KVConnectorFactory in vLLM 0.32), by where they run.
VLLM_CONNECTORS = {
    "NixlConnector": "NIXL (UCX; RDMA between nodes): vLLM's production P/D connector",
    "MoRIIOConnector": "AMD MoRI-IO (ROCm only)",
    "MooncakeConnector": "Mooncake transfer engine (RDMA)",
    "LMCacheConnectorV1": "LMCache (needs a GPU build of LMCache)",
    "ExampleConnector": "vLLM's debugging connector: KV through files on a shared path "
    "(the kit's CPU tests; refused on GPU clusters)",
}
# SGLang's --disaggregation-transfer-backend values a POC may name.
SGLANG_BACKENDS = ("mooncake", "nixl", "mori")
VLLM_A2A = (
    "allgather_reducescatter",
    "deepep_high_throughput",
    "deepep_low_latency",
    "deepep_v2",
    "mori_high_throughput",
    "mori_low_latency",
    "nixl_ep",
    "flashinfer_nvlink_two_sided",
    "flashinfer_nvlink_one_sided",
    "naive",
)
SGLANG_A2A = ("none", "deepep", "deepep_v2", "mori", "mooncake", "nixl", "flashinfer", "pplx")
# Backends that run on one vendor's GPUs only (the rest: both, where the framework has them).
A2A_VENDOR = {
    "mori_high_throughput": "amd",
    "mori_low_latency": "amd",
    "mori": "amd",
    "flashinfer_nvlink_two_sided": "nvidia",
    "flashinfer_nvlink_one_sided": "nvidia",
    "flashinfer": "nvidia",
    "pplx": "nvidia",
    "deepep_v2": "nvidia",
}
CONNECTOR_VENDOR = {"MoRIIOConnector": "amd", "mori": "amd"}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


class Pool(_Strict):
    """One role's servers: ``instances`` copies of one layout. An instance uses
    ``tp × dp`` GPUs (``tp`` with DP-attention); instances are placed in order, prefill
    first, on the cluster's nodes, several to a node when they fit."""

    instances: int = Field(1, ge=1, description="Servers in this pool.")
    tp: int = Field(1, ge=1, description="Tensor parallel size of one instance.")
    dp: int = Field(1, ge=1, description="Data parallel size of one instance.")
    ep: int = Field(1, ge=1, description="Expert parallel size of one instance (MoE only).")
    dp_attention: bool = Field(
        False, description="SGLang DP-attention inside the instance's TP group (MoE only)."
    )
    engine_args: dict[str, EngineArg] = Field(
        default_factory=dict,
        description="Engine arguments for this pool only, over `serving.engine_args` (e.g. a larger `max-num-batched-tokens` for prefill).",
    )

    @property
    def gpus(self) -> int:
        """GPUs of one instance."""
        return self.tp * (1 if self.dp_attention else self.dp)


class Disaggregation(_Strict):
    prefill: Pool = Field(description="The prefill pool (KV producers).")
    decode: Pool = Field(description="The decode pool (KV consumers).")
    connector: (
        Literal[
            "NixlConnector",
            "MoRIIOConnector",
            "MooncakeConnector",
            "LMCacheConnectorV1",
            "ExampleConnector",
        ]
        | None
    ) = Field(
        None,
        description="vLLM: the KV connector (`--kv-transfer-config`'s `kv_connector`); default `NixlConnector` on GPUs, `ExampleConnector` on `cpu`.",
    )
    transfer_backend: Literal["mooncake", "nixl", "mori"] | None = Field(
        None,
        description="SGLang: `--disaggregation-transfer-backend`; default `mooncake` (`mori` on AMD only).",
    )
    kv_buffer_device: Literal["auto", "cuda", "cpu"] = Field(
        "auto",
        description="vLLM NIXL: where KV is staged for transfer (`kv_buffer_device`); `auto`: the GPU on GPUs, `cpu` on `cpu`.",
    )
    shared_storage_path: str = Field(
        "/tmp/pocforge-kv",
        min_length=1,
        description="ExampleConnector: the folder both pools read and write (the kit puts it in the run folder when it runs here).",
    )
    side_channel_port: int = Field(
        5600,
        ge=1024,
        le=65000,
        description="vLLM NIXL: first handshake port (`VLLM_NIXL_SIDE_CHANNEL_PORT`); each instance on a node gets its own, one per DP rank.",
    )
    bootstrap_port: int = Field(
        8998,
        ge=1024,
        le=65000,
        description="SGLang: first prefill bootstrap port (`--disaggregation-bootstrap-port`); one per prefill instance on a node.",
    )
    ib_device: str | None = Field(
        None,
        description="SGLang: RDMA device(s) for the transfer (`--disaggregation-ib-device`, e.g. `mlx5_0,mlx5_1`); default: the transfer engine's choice.",
    )
    router: Literal["kit", "sglang-router"] = Field(
        "kit",
        description="What sends each request to a prefill and then a decode instance: the kit's small router (`pocforge.frameworks.pd_router`, vLLM's proxy pattern and SGLang's bootstrap protocol), or SGLang's own `sglang_router` (SGLang only).",
    )

    @property
    def gpus(self) -> int:
        return self.prefill.gpus * self.prefill.instances + self.decode.gpus * self.decode.instances


class KvOffload(_Strict):
    """A second KV tier in host memory, the engine's own."""

    backend: Literal["native", "lmcache", "hicache"] = Field(
        description="vLLM: `native` (its CPU offloading connector) or `lmcache` (`--kv-offloading-backend`); SGLang: `hicache` (`--enable-hierarchical-cache`)."
    )
    size_gb: float = Field(
        gt=0,
        description="Host memory for offloaded KV per instance, GB (vLLM `--kv-offloading-size`, SGLang `--hicache-size`).",
    )
    write_policy: Literal["write_through", "write_through_selective", "write_back"] | None = Field(
        None, description="SGLang HiCache: `--hicache-write-policy`."
    )
    storage_backend: Literal["file", "mooncake", "hf3fs", "nixl"] | None = Field(
        None, description="SGLang HiCache: a third tier (`--hicache-storage-backend`)."
    )


DeepepMode = Literal["auto", "normal", "low_latency"]


class Placement(BaseModel):
    """Where one instance runs: its role and index in the pool, the node ranks it spans,
    and its first GPU on each of them (instances on one node get disjoint GPU ranges)."""

    role: Literal["prefill", "decode"]
    index: int
    nodes: list[int]
    first_gpu: int
    gpus: int
    slot: int  # instances of any role placed before it on its first node (for ports)


def place(disagg: Disaggregation, nodes: int, gpus_per_node: int) -> list[Placement] | str:
    """Instances in order (prefill, then decode), each on the next free GPUs: within one
    node when it fits in one (never straddling two), else over whole nodes of its own. A
    string says why they do not fit."""
    placed: list[Placement] = []
    node, used = 0, 0
    slots: dict[int, int] = {}
    for role, pool in (("prefill", disagg.prefill), ("decode", disagg.decode)):
        need = pool.gpus
        if need > gpus_per_node and need % gpus_per_node:
            return (
                f"a {role} instance uses {need} GPUs: more than a node's {gpus_per_node} and "
                f"not a whole number of nodes"
            )
        for index in range(pool.instances):
            if need > gpus_per_node or used + need > gpus_per_node:
                node, used = (node + 1, 0) if used else (node, 0)
            span = max(1, need // gpus_per_node)
            if node + span > nodes:
                return (
                    f"{role} instance {index} needs {need} GPUs and no room is left "
                    f"({nodes} nodes × {gpus_per_node} GPUs, filled in order: prefill, then decode)"
                )
            slot = slots.get(node, 0)
            slots[node] = slot + 1
            placed.append(
                Placement(
                    role=role,
                    index=index,
                    nodes=list(range(node, node + span)),
                    first_gpu=used,
                    gpus=need,
                    slot=slot,
                )
            )
            if span > 1 or need == gpus_per_node:
                node, used = node + span, 0
            else:
                used += need
    return placed
