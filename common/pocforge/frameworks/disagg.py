"""Disaggregated serving: the prefill and decode pools' servers and the router in front.

Each instance is the framework adapter's own aggregated launch of that pool's layout
(:func:`pocforge.spec.planning.pool_spec`) on the nodes :func:`pocforge.spec.disagg.place`
gives it, with the KV connection added:

- vLLM: ``--kv-transfer-config`` (``kv_connector``, the role: ``kv_producer`` for prefill,
  ``kv_consumer`` for decode; ``kv_both`` for NIXL as vLLM's NIXL guide runs it) and, for
  NIXL, a handshake port per DP rank on a node (``VLLM_NIXL_SIDE_CHANNEL_HOST/PORT``);
- SGLang: ``--disaggregation-mode prefill|decode`` with the transfer backend, a bootstrap
  port per prefill instance on a node, the RDMA devices when named.

Instances that share a node get disjoint devices (``HIP_VISIBLE_DEVICES`` /
``CUDA_VISIBLE_DEVICES``; on ``cpu`` vLLM's core binding ``VLLM_CPU_OMP_THREADS_BIND``,
else every instance binds core 0) and their own HTTP port (``serving.port + 1 + n``). The
router listens on ``serving.port`` on node 0: the kit's (:mod:`.pd_router`) or
``sglang_router``. The load generator talks to the router only.
"""

from __future__ import annotations

import dataclasses

from pocforge.catalog import gpu
from pocforge.frameworks.base import LaunchContext, NodeLaunch, node_hosts
from pocforge.spec import PocSpec
from pocforge.spec.cluster_schema import Host
from pocforge.spec.disagg import Disaggregation, Placement, place
from pocforge.spec.planning import pool_spec

NIXL_ROLE = "kv_both"
ROLE = {"prefill": "kv_producer", "decode": "kv_consumer"}
VISIBLE = {"amd": "HIP_VISIBLE_DEVICES", "nvidia": "CUDA_VISIBLE_DEVICES"}


class DisaggPlanError(ValueError):
    """The pools do not fit the cluster (validate says the same, with the field)."""


def connector_of(spec: PocSpec) -> str:
    """vLLM's KV connector: the named one, else NIXL on GPUs and the shared-storage
    ExampleConnector on ``cpu``."""
    disagg = spec.serving.disaggregation
    return disagg.connector or (
        "ExampleConnector" if spec.cluster.gpu == "cpu" else "NixlConnector"
    )


def transfer_backend_of(spec: PocSpec) -> str:
    return spec.serving.disaggregation.transfer_backend or "mooncake"


def placements(spec: PocSpec) -> list[Placement]:
    disagg = spec.serving.disaggregation
    placed = place(disagg, spec.cluster.nodes, spec.cluster.gpus_per_node)
    if isinstance(placed, str):
        raise DisaggPlanError(f"serving.disaggregation: {placed}")
    return placed


def instance_port(spec: PocSpec, ctx: LaunchContext, order: int) -> int:
    """HTTP port of the ``order``-th instance (prefill first): right above the router's."""
    return (ctx.port or spec.serving.port) + 1 + order


def plan_disaggregated(spec: PocSpec, ctx: LaunchContext, adapter) -> list[NodeLaunch]:
    """Every instance's launches (each node rank the global one) and the router's."""
    disagg = spec.serving.disaggregation
    hosts = node_hosts(spec, ctx)
    launches: list[NodeLaunch] = []
    urls: dict[str, list[str]] = {"prefill": [], "decode": []}
    bootstraps: list[int] = []
    dp_ranks_before: dict[int, int] = {}  # NIXL handshake ports used on a node so far
    for order, where in enumerate(placements(spec)):
        pool = getattr(disagg, where.role)
        port = instance_port(spec, ctx, order)
        variant = _instance_spec(spec, where, hosts)
        extra = _connection_args(spec, where)
        if extra:
            serving = variant.serving
            engine = {**serving.engine_args, **extra}
            variant = variant.model_copy(
                update={"serving": serving.model_copy(update={"engine_args": engine})}
            )
        sub = dataclasses.replace(ctx, port=port)
        env = _devices(spec, where)
        node = where.nodes[0]
        if spec.serving.framework == "vllm" and connector_of(spec) == "NixlConnector":
            first = dp_ranks_before.get(node, 0)
            dp_ranks_before[node] = first + pool.dp
            env["VLLM_NIXL_SIDE_CHANNEL_HOST"] = hosts[node]
            env["VLLM_NIXL_SIDE_CHANNEL_PORT"] = str(disagg.side_channel_port + first)
        for one in adapter.plan(variant, sub):
            one.node_rank = where.nodes[one.node_rank]
            one.instance = where.index
            if one.role == "server":
                one.role = where.role
            one.env = {**one.env, **env}
            launches.append(one)
        urls[where.role].append(f"http://{hosts[node]}:{port}")
        if where.role == "prefill" and spec.serving.framework == "sglang":
            bootstraps.append(disagg.bootstrap_port + where.slot)
    launches.append(_router(spec, ctx, hosts[0], urls, bootstraps))
    return launches


def _instance_spec(spec: PocSpec, where: Placement, hosts: list[str]) -> PocSpec:
    """The pool's spec with the instance's own nodes as its cluster (global addresses)."""
    variant = pool_spec(spec, where.role)
    named = {h.address: h.name for h in spec.cluster.hosts}
    own = [Host(name=named.get(hosts[n], f"node{n}"), address=hosts[n]) for n in where.nodes]
    cluster = variant.cluster.model_copy(update={"hosts": own})
    return variant.model_copy(update={"cluster": cluster})


def _connection_args(spec: PocSpec, where: Placement) -> dict[str, object]:
    disagg: Disaggregation = spec.serving.disaggregation
    if spec.serving.framework == "vllm":
        connector = connector_of(spec)
        config: dict[str, object] = {
            "kv_connector": connector,
            "kv_role": NIXL_ROLE if connector == "NixlConnector" else ROLE[where.role],
        }
        if connector == "NixlConnector":
            device = disagg.kv_buffer_device
            if device == "auto":
                device = "cpu" if spec.cluster.gpu == "cpu" else "cuda"
            config["kv_buffer_device"] = device
        if connector == "ExampleConnector":
            config["kv_connector_extra_config"] = {
                "shared_storage_path": disagg.shared_storage_path
            }
        return {"kv-transfer-config": config}
    args: dict[str, object] = {
        "disaggregation-mode": where.role,
        "disaggregation-transfer-backend": transfer_backend_of(spec),
        "disaggregation-ib-device": disagg.ib_device,
    }
    if where.role == "prefill":
        args["disaggregation-bootstrap-port"] = disagg.bootstrap_port + where.slot
    return args


def _devices(spec: PocSpec, where: Placement) -> dict[str, str]:
    """The instance's own GPUs when it shares its node; on ``cpu`` its own cores (a "GPU"
    is a core: a cpu cluster is this machine's, so the nodes' cores are counted across
    nodes, as the vLLM adapter's data-parallel ranks are)."""
    per_node = spec.cluster.gpus_per_node
    if spec.cluster.gpu == "cpu":
        first = where.nodes[0] * per_node + where.first_gpu
        # vLLM's CPU worker binds OpenMP threads to this list ("0,1" or "0-1" syntax)
        return {
            "VLLM_CPU_OMP_THREADS_BIND": ",".join(str(c) for c in range(first, first + where.gpus))
        }
    if where.gpus >= per_node:
        return {}
    ids = ",".join(str(i) for i in range(where.first_gpu, where.first_gpu + where.gpus))
    return {VISIBLE[gpu(spec.cluster.gpu).vendor]: ids}


def _router(
    spec: PocSpec, ctx: LaunchContext, head: str, urls: dict[str, list[str]], bootstraps: list[int]
) -> NodeLaunch:
    disagg = spec.serving.disaggregation
    port = ctx.port or spec.serving.port
    bind = ctx.host_override or "0.0.0.0"
    framework = spec.serving.framework
    if disagg.router == "sglang-router":
        argv = [ctx.sglang_python, "-m", "sglang_router.launch_router", "--pd-disaggregation"]
        for url, bootstrap in zip(urls["prefill"], bootstraps, strict=True):
            argv += ["--prefill", url, str(bootstrap)]
        for url in urls["decode"]:
            argv += ["--decode", url]
        argv += ["--host", bind, "--port", str(port)]
    else:
        protocol = framework if framework == "sglang" else connector_of(spec)
        argv = [ctx.python, "-m", "pocforge.frameworks.pd_router", "--protocol", protocol]
        argv += ["--host", bind, "--port", str(port)]
        for n, url in enumerate(urls["prefill"]):
            argv += ["--prefill", url]
            if bootstraps:
                argv += ["--bootstrap-port", str(bootstraps[n])]
        for url in urls["decode"]:
            argv += ["--decode", url]
    return NodeLaunch(
        deployment="serving",
        framework=framework,
        node_rank=0,
        host=head,
        role="router",
        argv=argv,
        env={},
        health_url=f"http://{head}:{port}/health",
    )
