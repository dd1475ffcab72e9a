"""Cross-field rules: what a single field cannot know on its own.

Each rule takes a valid spec and yields ``(field path, message)`` pairs; the loader
locates them in the YAML.  Each has its own test in ``tests/spec/test_rules.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

from pocforge.catalog import gpu, gpu_names
from pocforge.metrics import EP_ALLTOALL_METRICS, STATISTICS, judgeable, metric
from pocforge.spec import disagg_rules, trtllm_options
from pocforge.spec.planning import facts_of, pool_spec, serving_model, shape_of, workload_points
from pocforge.spec.quantization import quantization_problem
from pocforge.spec.schema import MegatronLayout, PocSpec
from pocforge_kernels.integrations.support import serving_problem

Finding = tuple[tuple[str | int, ...], str]
Rule = Callable[[PocSpec], Iterator[Finding]]

COLLECTIVES = ("all_reduce", "all_gather", "alltoall", "reduce_scatter")
# The expert-parallel dispatch/combine phases (EpAllToAllResult.verdict_metrics), each also
# for one precision where the benchmark prints it (DeepEP's FP8 and BF16 dispatch).
EP_PHASES = tuple(
    f"ep_{phase}{precision}"
    for phase in ("dispatch", "combine", "dispatch_combine")
    for precision in ("", "_fp8", "_bf16")
)


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
    if par.dp_attention and par.tp % par.dp:
        yield (
            ("serving", "parallelism", "dp"),
            f"with dp_attention, dp ({par.dp}) must divide tp ({par.tp})",
        )


def expert_parallel_needs_moe(spec: PocSpec) -> Iterator[Finding]:
    """ep > 1 only for MoE models, no larger than the GPUs of one replica, and dividing the experts."""
    if spec.serving is None or spec.serving.parallelism.ep == 1:
        return
    par = spec.serving.parallelism
    facts = facts_of(spec)
    if facts.is_moe is None:
        yield (
            ("serving", "parallelism", "ep"),
            "cannot tell whether the model is MoE; add model.facts.experts (or point model.id at a folder with config.json)",
        )
        return
    if not facts.is_moe:
        yield (
            ("serving", "parallelism", "ep"),
            f"ep = {par.ep} but {spec.model.id} is a dense model; expert parallelism needs MoE",
        )
        return
    limit = par.tp if par.dp_attention else par.tp * par.dp
    if par.ep > limit:
        yield (("serving", "parallelism", "ep"), f"ep = {par.ep} is larger than tp×dp = {limit}")
    elif spec.serving.framework == "vllm" and par.ep != limit:
        yield (
            ("serving", "parallelism", "ep"),
            f"vLLM's expert parallelism spans all tp×dp = {limit} GPUs; set ep to {limit} (or 1 for none)",
        )
    if facts.experts and facts.experts % par.ep:
        yield (
            ("serving", "parallelism", "ep"),
            f"{facts.experts} experts do not split evenly over ep = {par.ep}",
        )


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


def training_fits_cluster(spec: PocSpec) -> Iterator[Finding]:
    """The training world size divides the cluster's GPU count; fp16 is refused on CPU.

    On a ``cpu`` cluster the processes share cores, not devices, so any world size fits.
    """
    if spec.training is None:
        return
    world = spec.training.world_size or spec.cluster.total_gpus
    if spec.cluster.gpu != "cpu" and spec.cluster.total_gpus % world:
        yield (
            ("training", "world_size"),
            f"world size {world} does not divide the cluster's {spec.cluster.total_gpus} GPUs",
        )
    if spec.cluster.gpu == "cpu" and spec.training.dtype == "float16":
        yield (("training", "dtype"), "DeepSpeed refuses float16 on CPU; use bfloat16 or float32")


_DEEPSPEED_ONLY = ("zero_stage", "offload", "ds_config")


def training_framework_fields(spec: PocSpec) -> Iterator[Finding]:
    """DeepSpeed's fields only with DeepSpeed, the ``megatron`` block only with Megatron."""
    training = spec.training
    if training is None:
        return
    if training.framework == "megatron":
        for name in _DEEPSPEED_ONLY:
            if name in training.model_fields_set:
                yield (
                    ("training", name),
                    f"{name} is a DeepSpeed setting; Megatron shards with training.megatron "
                    "(distributed_optimizer, tp, pp, cp, ep)",
                )
    elif training.megatron is not None:
        yield (
            ("training", "megatron"),
            f"the megatron block is for framework: megatron (this spec trains with {training.framework})",
        )


def megatron_layout_fits(spec: PocSpec) -> Iterator[Finding]:
    """Megatron's layout divides the world and the model the way Megatron requires:
    tp·pp·cp divides the world (dp is the rest), ep divides the experts and ep·expert_tp·pp
    the world, VPP needs pp > 1 and layers divisible by pp·vpp, CP needs a sequence
    divisible by 2·cp, heads and query groups divisible by tp, sequence parallel needs
    tp > 1; the CPU driver trains dense models in float32 without the GPU-only switches."""
    training = spec.training
    if training is None or training.framework != "megatron":
        return
    layout = training.megatron or MegatronLayout()
    where = ("training", "megatron")
    world = training.world_size or spec.cluster.total_gpus
    if world % layout.model_parallel:
        yield (
            where,
            f"tp·pp·cp = {layout.tp}·{layout.pp}·{layout.cp} = {layout.model_parallel} does not "
            f"divide the {world} training GPUs; data parallelism is what is left",
        )
        return
    facts = facts_of(spec)
    if facts.heads and facts.heads % layout.tp:
        yield ((*where, "tp"), f"tp {layout.tp} does not divide the model's {facts.heads} heads")
    groups = facts.kv_heads or facts.heads
    if groups and layout.tp > 1 and groups % layout.tp and layout.tp % groups:
        yield (
            (*where, "tp"),
            f"tp {layout.tp} and the model's {groups} query groups (kv heads) do not divide each other",
        )
    if facts.layers and facts.layers % layout.pp:
        yield (
            (*where, "pp"),
            f"pp {layout.pp} does not divide the model's {facts.layers} layers",
        )
    if layout.vpp is not None:
        if layout.pp == 1:
            yield ((*where, "vpp"), "virtual pipeline stages need pp > 1")
        elif facts.layers and facts.layers % (layout.pp * layout.vpp):
            yield (
                (*where, "vpp"),
                f"{facts.layers} layers do not split into pp·vpp = {layout.pp * layout.vpp} chunks",
            )
    if layout.cp > 1 and training.seq_len % (2 * layout.cp):
        yield (
            (*where, "cp"),
            f"seq_len {training.seq_len} must be divisible by 2·cp = {2 * layout.cp} "
            "(each CP rank takes two load-balanced chunks)",
        )
    if layout.sequence_parallel and layout.tp == 1:
        yield ((*where, "sequence_parallel"), "sequence parallelism needs tp > 1")
    if layout.ep > 1 or layout.expert_tp is not None:
        if not facts.experts:
            yield ((*where, "ep"), "expert parallelism is for MoE models (model.facts.experts)")
        elif facts.experts % layout.ep:
            yield ((*where, "ep"), f"ep {layout.ep} does not divide the {facts.experts} experts")
        expert_group = layout.ep * (layout.expert_tp or layout.tp) * layout.pp
        if world % expert_group:
            yield (
                (*where, "ep"),
                f"ep·expert_tp·pp = {expert_group} does not divide the {world} training GPUs",
            )
    if spec.cluster.gpu == "cpu":
        yield from _megatron_on_cpu(training, layout)
        if facts.experts:
            yield (
                ("model",),
                "the CPU Megatron driver trains dense models only (megatron-core's MoE layers "
                "create CUDA streams); use a dense tiny model",
            )


def _megatron_on_cpu(training, layout: MegatronLayout) -> Iterator[Finding]:
    """The kit's CPU driver (Megatron-Core on gloo) trains fp32 with torch's Adam and the
    local layers; what needs Transformer Engine or Megatron's CUDA optimizer is refused."""
    where = ("training", "megatron")
    if training.dtype != "float32":
        yield (("training", "dtype"), "Megatron on cpu trains float32 only")
    for name, value in (
        ("fp8", layout.fp8),
        ("distributed_optimizer", layout.distributed_optimizer),
        ("cp", layout.cp > 1),
        ("vpp", layout.vpp),
        ("sequence_parallel", layout.sequence_parallel),
        ("recompute", layout.recompute != "none"),
        ("entry", layout.entry != "megatron-lm"),
        ("data", layout.data.kind != "mock"),
    ):
        if value:
            yield ((*where, name), f"{name} needs a GPU node; the CPU driver does not run it")


def competitors_are_comparable(spec: PocSpec) -> Iterator[Finding]:
    """The price basis is one the catalog has, a competitor names one of our workloads, and
    a ``published`` file is not also given a ``published`` block (it carries its own)."""
    from pocforge.catalog.prices import price_bases

    compare = spec.compare
    if compare.price_basis not in price_bases():
        yield (
            ("compare", "price_basis"),
            f"unknown price basis {compare.price_basis!r} (catalog/prices.yaml has: "
            f"{', '.join(price_bases())})",
        )
    ours = [w.name for w in spec.serving.workloads] if spec.serving else []
    for index, comp in enumerate(compare.competitors):
        if comp.workload is not None and comp.workload not in ours:
            yield (
                ("compare", "competitors", index, "workload"),
                f"no workload named {comp.workload!r} (workloads: {', '.join(ours) or 'none'})",
            )
        if comp.format == "published" and comp.published is not None:
            yield (
                ("compare", "competitors", index, "published"),
                "a `published` file names its own source and date; leave this block out",
            )


def gates_have_something_to_check(spec: PocSpec) -> Iterator[Finding]:
    """Parity compares the POC's kit kernels against the framework's own, so it needs
    kernels; accuracy task names are unique; the gates need vLLM's or SGLang's completions
    with log-probabilities."""
    serving = spec.serving
    if serving is None:
        return
    if serving.parity is not None and not serving.kernels:
        yield (
            ("serving", "parity"),
            "parity compares the POC's kit kernels with the framework's own, and "
            "serving.kernels is empty: add kernels or remove the gate",
        )
    names = [t.name for t in serving.accuracy]
    for index, name in enumerate(names):
        if name in names[:index]:
            yield (
                ("serving", "accuracy", index, "name"),
                f"accuracy task {name!r} is listed twice",
            )


def hosts_match_nodes(spec: PocSpec) -> Iterator[Finding]:
    """Listed hosts are one per node, with unique names."""
    hosts = spec.cluster.hosts
    if hosts and len(hosts) != spec.cluster.nodes:
        yield (("cluster", "hosts"), f"{len(hosts)} hosts listed for {spec.cluster.nodes} nodes")
    names = [h.name for h in hosts]
    for index, name in enumerate(names):
        if name in names[:index]:
            yield (("cluster", "hosts", index, "name"), f"host {name!r} is listed twice")


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
TOOL_VENDOR = {"nsys": "nvidia", "rocprofv3": "amd"}
TOOL_FOR = {"nvidia": "nsys", "amd": "rocprofv3"}


def _tool_problem(spec: PocSpec, tool: str) -> str | None:
    """Why ``tool`` cannot profile this spec's cluster (None when it can)."""
    if tool == "torch":
        return None
    facts = gpu(spec.cluster.gpu)
    if facts.vendor == TOOL_VENDOR[tool]:
        return None
    where = f"{facts.name} ({facts.vendor.upper()})" if facts.is_gpu else "cpu (no GPU)"
    other = TOOL_FOR.get(facts.vendor)
    fix = f"use tool: {other} or torch" if other else "use tool: torch (the default)"
    return f"{tool} profiles {TOOL_VENDOR[tool].upper()} GPUs and cluster.gpu is {where}: {fix}"


def profiled_steps_exist(spec: PocSpec) -> Iterator[Finding]:
    """Profiled training steps are steps of the run (the kit's DeepSpeed driver and
    Megatron-LM's ``--profile`` run torch's profiler or mark the range a GPU tool records),
    and the tool profiles the cluster's GPUs."""
    training = spec.training
    if training is None or training.profile is None:
        return
    path = ("training", "profile")
    problem = _tool_problem(spec, training.profile.tool)
    if problem:
        yield (*path, "tool"), problem
    for k, step in enumerate(training.profile.steps):
        if step >= training.steps:
            yield (
                (*path, "steps", k),
                f"step {step} is not a step of the run (training.steps is {training.steps}: 0 to {training.steps - 1})",
            )


def profiled_points_exist(spec: PocSpec) -> Iterator[Finding]:
    """A workload's profiled points are among its own (``c<concurrency>``, ``r<rate>``, as
    the summaries name them), served by a framework whose profiler the kit drives."""
    if spec.serving is None:
        return
    first: tuple[str, str] | None = None  # (workload, tool) of the first profiled workload
    rocprof: list[str] = []  # the points rocprofv3 profiles, across the workloads
    for n, workload in enumerate(spec.serving.workloads):
        if workload.profile is None:
            continue
        path = ("serving", "workloads", n, "profile")
        tool = workload.profile.tool
        if spec.serving.framework not in ("vllm", "sglang"):
            yield (
                path,
                f"profiling drives vLLM's and SGLang's profiler switch, not {spec.serving.framework}'s",
            )
        problem = _tool_problem(spec, tool)
        if problem:
            yield (*path, "tool"), problem
        if first is None:
            first = (workload.name, tool)
        elif tool != first[1]:
            yield (
                (*path, "tool"),
                f"one server serves every workload, so one profiler: workload {first[0]} uses "
                f"{first[1]} and {workload.name} {tool}; give both the same tool",
            )
        if tool == "rocprofv3":
            rocprof += [f"{workload.name} {p}" for p in workload.profile.points]
            if len(rocprof) > 1:
                yield (
                    (*path, "points"),
                    "rocprofv3 writes its files when the server exits, so a serving stage "
                    f"profiles one point with it ({', '.join(rocprof)}): keep one",
                )
        load = workload.load
        if workload.dataset.kind == "trace":
            ids = [f"t{1.0 / workload.dataset.time_scale:g}"]
        elif load.concurrency is not None:
            ids = [f"c{c}" for c in load.concurrency]
        else:
            ids = [f"r{r:g}" for r in load.request_rate]
        for k, point in enumerate(workload.profile.points):
            if point not in ids:
                yield (
                    (*path, "points", k),
                    f"{point!r} is not a point of workload {workload.name} ({', '.join(ids)})",
                )


def workload_names_unique(spec: PocSpec) -> Iterator[Finding]:
    if spec.serving is None:
        return
    names = [w.name for w in spec.serving.workloads]
    for index, name in enumerate(names):
        if name in names[:index]:
            yield (("serving", "workloads", index, "name"), f"workload {name!r} is defined twice")


def criteria_are_produced(spec: PocSpec) -> Iterator[Finding]:
    """Every acceptance criterion names a metric some stage of this spec will produce."""
    for index, criterion in enumerate(spec.acceptance.criteria):
        problem = _criterion_problem(spec, criterion.parts)
        if problem:
            yield (("acceptance", "criteria", index, "metric"), f"{criterion.metric}: {problem}")


def _criterion_problem(spec: PocSpec, parts: list[str]) -> str | None:
    section = parts[0]
    if section == "serving":
        if spec.serving is None:
            return "the spec has no serving section"
        workloads = [w.name for w in spec.serving.workloads]
        if len(parts) < 3:
            return "write serving.<workload>.<metric>[.<statistic>]"
        if parts[1] not in workloads:
            return f"no workload named {parts[1]!r} (workloads: {', '.join(workloads)})"
        workload = next(w for w in spec.serving.workloads if w.name == parts[1])
        if parts[2] == "goodput" and not workload.slos:
            return (
                f"goodput counts requests meeting every SLO of the workload and {parts[1]!r} has "
                "none, so it is never reported; add slos to the workload or drop the criterion"
            )
        return _metric_problem("serving", parts[2:], spec)
    if section == "training":
        if spec.training is None:
            return "the spec has no training section"
        if parts[1:2] == ["mfu"] and spec.training.dtype == "float32":
            # frameworks/deepspeed.py claims a dense peak for bf16 and fp16 only
            return (
                "mfu needs the GPU's dense peak for the training dtype; none is claimed for float32"
            )
        return _metric_problem("training", parts[1:], spec)
    if section == "kernels":
        ops = [k.op for k in spec.kernels.ops] if spec.kernels else []
        if len(parts) < 3:
            return "write kernels.<op>.<metric>"
        if parts[1] not in ops:
            return f"kernel {parts[1]!r} is not in kernels.ops ({', '.join(ops) or 'none'})"
        return _metric_problem("kernels", parts[2:], spec)
    if section == "collectives":
        if len(parts) < 3 or parts[1] not in COLLECTIVES + EP_PHASES:
            return (
                "write collectives.<collective>.<metric> with a collective of "
                f"{', '.join(COLLECTIVES)} or an expert-parallel phase of ep_dispatch, "
                "ep_combine, ep_dispatch_combine (each also _fp8, _bf16)"
            )
        ep = parts[1] in EP_PHASES
        if parts[2] in judgeable("collectives") and (parts[2] in EP_ALLTOALL_METRICS) != ep:
            allowed = [n for n in judgeable("collectives") if (n in EP_ALLTOALL_METRICS) == ep]
            what = "an expert-parallel phase" if ep else "an nccl-tests collective"
            return f"{parts[2]} is not a metric of {what} (allowed: {', '.join(allowed)})"
        return _metric_problem("collectives", parts[2:], spec)
    if section == "accuracy":
        tasks = [t.name for t in spec.serving.accuracy] if spec.serving else []
        if len(parts) != 3:
            return "write accuracy.<task>.<metric> (the metric as the task's lm-eval YAML names it)"
        if parts[1] not in tasks:
            return f"no accuracy task named {parts[1]!r} in serving.accuracy ({', '.join(tasks) or 'none'})"
        return None
    if section == "parity":
        if spec.serving is None or spec.serving.parity is None:
            return "the spec has no serving.parity gate"
        return _metric_problem("parity", parts[1:], spec)
    return "a metric path starts with serving, training, kernels, collectives, accuracy or parity"


def _metric_problem(section: str, rest: list[str], spec: PocSpec) -> str | None:
    """Why ``rest`` (metric[.statistic]) cannot be judged; the names are the registry's
    judgeable ones, the same list the judge decides (``pocforge.metrics.judgeable``)."""
    allowed = ", ".join(judgeable(section))
    if not rest:
        return f"name a metric ({allowed})"
    found = metric(section, rest[0])
    if found is None or rest[0] not in judgeable(section):
        return f"unknown {section} metric {rest[0]!r} (allowed: {allowed})"
    if found.needs_gpu and not gpu(spec.cluster.gpu).is_gpu:
        why = (
            "DeepEP and MoRI run on GPUs only"
            if found.name in EP_ALLTOALL_METRICS
            else "a `cpu` cluster runs kernels under the Triton interpreter, untimed, and "
            "has no peak"
        )
        return f"{rest[0]} is measured on a GPU only ({why}); drop the criterion or use a GPU"
    if found.distribution and len(rest) != 2:
        return f"{rest[0]} is a distribution: add a statistic ({', '.join(STATISTICS)})"
    if found.distribution and rest[1] not in STATISTICS:
        return f"unknown statistic {rest[1]!r} (allowed: {', '.join(STATISTICS)})"
    if not found.distribution and len(rest) != 1:
        return f"{rest[0]} is a single number per run; drop {'.'.join(rest[1:])!r}"
    return None


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


RULES: list[Rule] = [
    serving_fits_cluster,
    serving_fits_memory,
    expert_parallel_needs_moe,
    dp_attention_needs_moe,
    serving_kernels_run,
    quantization_has_a_flag,
    platform_switches_apply,
    trtllm_deployment_fits,
    training_fits_cluster,
    training_framework_fields,
    megatron_layout_fits,
    competitors_are_comparable,
    gates_have_something_to_check,
    hosts_match_nodes,
    turns_follow_their_predecessors,
    profiled_points_exist,
    profiled_steps_exist,
    workload_names_unique,
    criteria_are_produced,
    *disagg_rules.RULES,
]


def check_rules(spec: PocSpec) -> list[Finding]:
    return [finding for rule in RULES for finding in rule(spec)]
