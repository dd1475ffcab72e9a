"""Cross-field rules of the serving section: the deployment fits the cluster and the GPUs'
memory, expert and data-parallel attention need a MoE, the kit's kernels and the
quantization run on the framework, the platform's switches apply, TensorRT-LLM's layout,
the workloads' names and multi-turn chains (:data:`pocforge.spec.rules.RULES`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from pocforge.catalog import gpu, gpu_names
from pocforge.plan.layout import Layout, layout_problems
from pocforge.spec import trtllm_options
from pocforge.spec.finding import Finding
from pocforge.spec.planning import facts_of, pool_spec, serving_model, shape_of, workload_points
from pocforge.spec.quantization import quantization_problem
from pocforge.spec.schema import PocSpec
from pocforge_kernels.integrations.support import serving_problem


def serving_fits_cluster(spec: PocSpec) -> Iterator[Finding]:
    """tp × pp × dp × replicas uses exactly the cluster's GPUs (DP-attention lives inside TP);
    a disaggregated deployment's pools are sized by :mod:`.disagg_rules`."""
    if spec.serving is None or spec.serving.disaggregation is not None:
        return
    par, replicas = spec.serving.parallelism, spec.serving.replicas
    per_replica = par.tp * par.pp * (1 if par.dp_attention else par.dp)
    total = spec.cluster.total_gpus
    if per_replica * replicas != total:
        formula = "tp×pp" if par.dp_attention else "tp×pp×dp"
        yield (
            ("serving", "parallelism"),
            f"{formula}×replicas = {per_replica * replicas} but the cluster has {total} GPUs "
            f"({spec.cluster.nodes} nodes × {spec.cluster.gpus_per_node}); change the sizes or serving.replicas",
        )


def expert_parallel_needs_moe(spec: PocSpec) -> Iterator[Finding]:
    """ep > 1 only for MoE models; the framework's own layout rules (ep's span, DP
    attention's groups) are :func:`pocforge.plan.layout.layout_problems`, the planner's too."""
    if spec.serving is None or spec.serving.disaggregation is not None:
        return
    par = spec.serving.parallelism
    facts = facts_of(spec)
    if par.ep > 1 and facts.is_moe is None:
        yield (
            ("serving", "parallelism", "ep"),
            "cannot tell whether the model is MoE; add model.facts.experts (or point model.id at a folder with config.json)",
        )
        return
    if par.ep > 1 and not facts.is_moe:
        yield (
            ("serving", "parallelism", "ep"),
            f"ep = {par.ep} but {spec.model.id} is a dense model; expert parallelism needs MoE",
        )
        return
    if par.dp_attention and spec.serving.framework == "vllm":
        return  # dp_attention_needs_moe says vLLM has none
    layout = Layout(tp=par.tp, pp=par.pp, dp=par.dp, ep=par.ep, dp_attention=par.dp_attention)
    for field, message in layout_problems(spec.serving.framework, layout, facts.experts):
        yield (("serving", "parallelism", field), message)


def dp_attention_needs_moe(spec: PocSpec) -> Iterator[Finding]:
    """DP-attention is SGLang's layout for MoE models (vLLM uses dp + ep for the same)."""
    if spec.serving is None or not spec.serving.parallelism.dp_attention:
        return
    path = ("serving", "parallelism", "dp_attention")
    if spec.serving.framework not in ("sglang", "trtllm"):
        yield (
            path,
            "dp_attention is an SGLang option (and TensorRT-LLM's enable_attention_dp); with "
            "vLLM use dp with ep for attention data parallelism",
        )
    if facts_of(spec).is_moe is not True:
        yield (
            path,
            "dp_attention only helps MoE models (dense attention+MLP would be replicated); add model.facts.experts if this model is MoE",
        )


def serving_kernels_run(spec: PocSpec) -> Iterator[Finding]:
    """Every kit kernel in ``serving.kernels`` will run inside the framework with the model's
    dtype, quantization and the parallel layout (``pocforge_kernels.integrations.support``,
    the table the plugins register from); one that would not is a promise the server breaks."""
    if spec.serving is None:
        return
    for index, op in enumerate(spec.serving.kernels):
        problem = serving_problem(
            spec.serving.framework,
            op,
            dtype=spec.model.dtype,
            quantization=spec.model.quantization,
            expert_parallel=spec.serving.parallelism.ep > 1,
        )
        if problem:
            yield (
                ("serving", "kernels", index),
                f"{op} will not run: {problem}; remove it from serving.kernels "
                "(kernels.ops still benchmarks it on its own)",
            )


def quantization_has_a_flag(spec: PocSpec) -> Iterator[Finding]:
    """``model.quantization`` becomes a ``--quantization`` the serving framework knows
    (``spec/quantization.py``), and ``fp8_block`` names a block-FP8 checkpoint when its
    config.json is at hand (the frameworks read the block size from it)."""
    if spec.serving is None:
        return
    quantization = spec.model.quantization
    problem = quantization_problem(spec.serving.framework, quantization)
    if problem:
        yield (("model", "quantization"), problem)
    config = _local_config(spec) if quantization == "fp8_block" else None
    if config is not None and not (config.get("quantization_config") or {}).get(
        "weight_block_size"
    ):
        yield (
            ("model", "quantization"),
            f"fp8_block serves a block-FP8 checkpoint, but {spec.model.id}'s config.json has "
            "no quantization_config.weight_block_size; write fp8 (online per-tensor FP8)",
        )


def platform_switches_apply(spec: PocSpec) -> Iterator[Finding]:
    """``serving.platform.aiter`` is vLLM's ROCm switch ``VLLM_ROCM_USE_AITER`` (the parent
    switch of vLLM's AITER kernels, ``vllm/envs.py``): it needs vLLM on an AMD GPU, and a
    ``runtime.env`` entry of the same variable must not say the opposite."""
    if spec.serving is None or spec.serving.platform is None:
        return
    aiter = spec.serving.platform.aiter
    if aiter is None:
        return
    path = ("serving", "platform", "aiter")
    if spec.serving.framework != "vllm":
        yield (
            path,
            f"aiter is vLLM's ROCm switch (VLLM_ROCM_USE_AITER); {spec.serving.framework} does "
            "not read it: remove serving.platform.aiter",
        )
    facts = gpu(spec.cluster.gpu)
    if facts.vendor != "amd":
        where = "a cpu cluster" if not facts.is_gpu else f"{facts.name} ({facts.vendor})"
        yield (
            path,
            f"AITER kernels run on AMD GPUs (ROCm) only and cluster.gpu is {where}: "
            "remove serving.platform.aiter",
        )
    env = spec.serving.runtime.env.get("VLLM_ROCM_USE_AITER")
    if env is not None and (env.strip().lower() in ("1", "true")) != aiter:
        yield (
            path,
            f"serving.runtime.env sets VLLM_ROCM_USE_AITER={env!r}, the opposite of aiter: "
            f"{str(aiter).lower()}; keep one of the two",
        )


def trtllm_deployment_fits(spec: PocSpec) -> Iterator[Finding]:
    """TensorRT-LLM (``framework: trtllm``) runs on an NVIDIA GPU, on one node (its multi-node
    serving starts every rank through MPI, ``mpirun`` or ``srun`` with ``trtllm-llmapi-launch``,
    which the kit's one launch per node does not do), in its own layout: ``tp_size`` GPUs per
    server, attention DP over all of them, ``ep`` dividing ``tp`` (each MoE layer splits its
    GPUs into ep × moe_tp), no data-parallel copies inside one server; it takes no
    ``--served_model_name`` and an E4M3 FP8 KV cache only; its flags and LLM API keys are
    TensorRT-LLM's (``spec/trtllm_options.py``). The ``serving.trtllm`` block is for it only."""
    serving = spec.serving
    if serving is None:
        return
    if serving.framework != "trtllm":
        if serving.trtllm is not None:
            yield (
                ("serving", "trtllm"),
                f"the trtllm block is for framework: trtllm (this spec serves with "
                f"{serving.framework}); remove it, or set serving.framework: trtllm",
            )
        return
    facts = gpu(spec.cluster.gpu)
    if facts.vendor != "nvidia":
        nvidia = ", ".join(name for name in gpu_names() if gpu(name).vendor == "nvidia")
        what = f"{facts.name} ({facts.vendor.upper()})" if facts.is_gpu else "cpu (no GPU)"
        yield (
            ("cluster", "gpu"),
            f"serving.framework trtllm (TensorRT-LLM) runs on NVIDIA GPUs only and cluster.gpu "
            f"is {what}; set cluster.gpu to an NVIDIA GPU of the catalog ({nvidia}), or serve "
            "with vllm or sglang",
        )
    if spec.cluster.nodes > 1:
        yield (
            ("cluster", "nodes"),
            f"the kit serves trtllm on one node and cluster.nodes is {spec.cluster.nodes}: "
            "TensorRT-LLM's multi-node serving starts all ranks through MPI (mpirun, or srun "
            "with trtllm-llmapi-launch); set nodes: 1 (serving.replicas for more copies), or "
            "serve across nodes with vllm or sglang",
        )
    par = serving.parallelism
    where = ("serving", "parallelism")
    if par.dp > 1 and not par.dp_attention:
        yield (
            (*where, "dp"),
            f"dp = {par.dp}: one trtllm-serve holds one copy of the model; use "
            "serving.replicas for copies, or dp_attention with dp = tp (attention DP)",
        )
    if par.dp_attention and par.dp != par.tp:
        yield (
            (*where, "dp"),
            f"TensorRT-LLM's attention DP (enable_attention_dp) spans all tp GPUs: with "
            f"dp_attention, dp must equal tp ({par.tp}), not {par.dp}",
        )
    if par.ep > 1 and par.tp % par.ep:
        yield (
            (*where, "ep"),
            f"ep = {par.ep} does not divide tp = {par.tp}: TensorRT-LLM splits each MoE layer's "
            "tp GPUs into ep × moe_tp",
        )
    if spec.model.served_name is not None:
        yield (
            ("model", "served_name"),
            "trtllm-serve has no --served_model_name (clients name the model by the id or "
            "path it serves); remove model.served_name",
        )
    if spec.model.kv_cache_dtype not in trtllm_options.KV_CACHE_DTYPES:
        yield (
            ("model", "kv_cache_dtype"),
            f"TensorRT-LLM has no {spec.model.kv_cache_dtype} KV cache (its FP8 cache is "
            "E4M3, kv_cache_config.dtype: fp8); write fp8 or auto",
        )
    yield from trtllm_options.problems(spec)


def _local_config(spec: PocSpec) -> dict | None:
    """The model folder's parsed config.json, when the folder is on this machine."""
    folder = Path(spec.model.id)
    if spec.source_dir is not None and not folder.is_absolute():
        folder = spec.source_dir / folder
    try:
        return json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return None


def turns_follow_their_predecessors(spec: PocSpec) -> Iterator[Finding]:
    """A multi_turn or doc_qa workload is sent turn-major; only with at least as many users
    (documents) as requests in flight has each turn's predecessor finished when it is sent,
    so its history is there to reuse."""
    if spec.serving is None:
        return
    for n, workload in enumerate(spec.serving.workloads):
        data = workload.dataset
        if data.kind not in ("multi_turn", "doc_qa"):
            continue
        count = data.users if data.kind == "multi_turn" else data.documents
        rounds = data.turns if data.kind == "multi_turn" else data.questions
        if workload.num_prompts != count * rounds:
            yield (
                ("serving", "workloads", n, "num_prompts"),
                f"the {data.kind} dataset sends {count} × {rounds} = {count * rounds} requests "
                f"per repeat; set num_prompts to {count * rounds}",
            )
        widest = max(workload.load.concurrency or [workload.load.max_concurrency or 0])
        if widest > count:
            what = "users" if data.kind == "multi_turn" else "documents"
            yield (
                ("serving", "workloads", n, "dataset", what),
                f"{count} {what} but up to {widest} requests in flight: a turn would be sent "
                f"before its predecessor finished; raise {what} to at least {widest} or lower "
                "the concurrency",
            )


# the GPUs each vendor profiler reads (pocforge.frameworks.gpu_profiler wraps the launch)


def workload_names_unique(spec: PocSpec) -> Iterator[Finding]:
    if spec.serving is None:
        return
    names = [w.name for w in spec.serving.workloads]
    for index, name in enumerate(names):
        if name in names[:index]:
            yield (("serving", "workloads", index, "name"), f"workload {name!r} is defined twice")


def serving_fits_memory(spec: PocSpec) -> Iterator[Finding]:
    """The layout holds the weights, the engine's activations and workspace, and the KV
    cache of one request at the longest ISL + OSL a workload sends (the planner's memory
    model, :mod:`pocforge.plan.memory`); skipped when the model's facts cannot size it."""
    if spec.serving is None or spec.model.tiny is not None:
        return
    if spec.serving.disaggregation is not None:  # each pool's instance on its own GPUs
        for role in ("prefill", "decode"):
            for path, message in serving_fits_memory(pool_spec(spec, role)):
                yield path, f"the {role} pool: {message}"
        return
    shape = shape_of(spec)
    if shape is None:
        return
    model = serving_model(spec, shape)
    memory = model.memory
    for n, workload in enumerate(spec.serving.workloads):
        longest = workload_points(spec, workload).longest
        if memory.requests(longest) >= 1:
            continue
        par = spec.serving.parallelism
        gb = 1e9
        yield (
            ("serving", "workloads", n),
            f"{spec.model.id} in {model.precision} on {par.tp * par.pp} {spec.cluster.gpu} per "
            f"replica (tp {par.tp}, pp {par.pp}) does not fit: {memory.weights / gb:.1f} GB of "
            f"weights + {memory.activations / gb:.1f} GB activations + "
            f"{memory.workspace / gb:.1f} GB workspace per GPU leave "
            f"{max(memory.kv_budget, 0) / gb:.2f} GB of {memory.capacity / gb:.1f} GB for the KV "
            f"cache, and one request of {longest} tokens needs "
            f"{memory.kv_per_token * longest / gb:.2f} GB; raise tp or pp, quantize, or shorten "
            "the workload (`pocforge plan` ranks the layouts that fit)",
        )
        return
