"""A spec as the planner's inputs: the model's shape, the deployment's layout and formats,
and its workload points. The one place :mod:`pocforge.plan` meets :class:`PocSpec`
(validate's memory rule, ``pocforge plan`` and the run's ``plan.json`` all start here)."""

from __future__ import annotations

from dataclasses import dataclass

from pocforge.catalog import ModelFacts, model_facts
from pocforge.catalog.model_facts import facts_from_config
from pocforge.plan import (
    Device,
    Layout,
    Serving,
    ServingPoint,
    Shape,
    ShapeError,
    Slos,
    Training,
    TrainingPoint,
)
from pocforge.spec.schema import PocSpec
from pocforge.spec.serving_schema import Lengths, ServingSpec, Workload
from pocforge.spec.training_schema import MegatronLayout
from pocforge.spec.trtllm_options import server_numbers
from pocforge.tiny_model.make import planned_config

# model.quantization -> the planner's weight format (int8/AWQ/GPTQ: their weight bytes)
_QUANTIZED = {
    "fp8": "fp8",
    "fp8_block": "fp8",
    "int8": "fp8",
    "mxfp4": "fp4",
    "awq": "fp4",
    "gptq": "fp4",
}
_DTYPE = {"float32": "fp32", "bfloat16": "bf16", "float16": "bf16", "auto": "bf16"}


def facts_of(spec: PocSpec) -> ModelFacts:
    """The model's facts: its local config.json (if any), the shipped catalog, the tiny
    builder's arch, overrides."""
    facts = model_facts(spec.model.id, spec.source_dir, spec.model.facts)
    if facts.layers is None and spec.model.tiny is not None:  # not built yet
        planned = facts_from_config(planned_config(spec.model.tiny.arch))
        facts = planned.model_copy(update=facts.model_dump(exclude_none=True))
    if facts.experts is None and spec.model.tiny is not None:
        facts = facts.model_copy(update={"experts": 8 if spec.model.tiny.arch == "qwen-moe" else 0})
    return facts


def shape_of(spec: PocSpec) -> Shape | None:
    """The model's shape, or None when its facts are not known well enough to size it."""
    try:
        return Shape(facts_of(spec))
    except ShapeError:
        return None


def precision_of(spec: PocSpec) -> str:
    if spec.model.quantization != "none":
        return _QUANTIZED[spec.model.quantization]
    return _DTYPE[spec.model.dtype]


def kv_dtype_of(spec: PocSpec) -> str:
    if spec.model.kv_cache_dtype != "auto":
        return "fp8"
    return "fp32" if spec.model.dtype == "float32" else "bf16"


def _engine_number(serving: ServingSpec, *names: str) -> float | None:
    for name in names:
        for key in (name, name.replace("_", "-")):
            value = serving.engine_args.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                return float(value)
    return None


def serving_layout(spec: PocSpec) -> Layout:
    par = spec.serving.parallelism  # type: ignore[union-attr]
    return Layout(tp=par.tp, pp=par.pp, dp=par.dp, ep=par.ep, dp_attention=par.dp_attention)


def device_of(spec: PocSpec) -> Device:
    return Device.of(spec.cluster.gpu, spec.cluster.gpus_per_node)


def serving_model(spec: PocSpec, shape: Shape, layout: Layout | None = None) -> Serving:
    """The spec's serving deployment (or ``layout`` instead of its own) as a planner model."""
    serving = spec.serving
    assert serving is not None
    fraction = _engine_number(serving, "gpu_memory_utilization", "mem_fraction_static")
    batched = _engine_number(serving, "max_num_batched_tokens", "chunked_prefill_size")
    batch = _engine_number(serving, "max_num_seqs", "max_running_requests")
    if serving.framework == "trtllm":  # typed flags or its LLM API options, not engine_args
        trt_batch, trt_tokens = server_numbers(spec)
        batch = float(trt_batch) if trt_batch else None
        batched = float(trt_tokens) if trt_tokens else None
    return Serving(
        shape,
        layout or serving_layout(spec),
        device_of(spec),
        serving.framework,
        precision_of(spec),
        kv_dtype_of(spec),
        memory_fraction=fraction,
        max_batched_tokens=int(batched) if batched else None,
        max_batch=int(batch) if batch else None,
    )


def _longest(lengths: Lengths | None, fallback: int) -> int:
    if lengths is None:
        return fallback
    if lengths.max is not None:
        return lengths.max
    return int(lengths.mean + 3 * lengths.std)


def _mean(lengths: Lengths | None, fallback: int) -> int:
    return fallback if lengths is None else int(lengths.mean)


def _lengths_of(workload: Workload) -> tuple[Lengths | None, Lengths | None]:
    """(prompt, output) length distributions a workload states (None: not stated)."""
    data = workload.dataset
    kind = data.kind
    if kind == "random":
        return data.isl, data.osl
    if kind == "shared_prefix":
        suffix = data.suffix_len
        prompt = Lengths(
            mean=data.prefix_len + suffix.mean,
            max=data.prefix_len + suffix.max if suffix.max else None,
            std=suffix.std,
        )
        return prompt, data.osl
    if kind == "sharegpt":
        prompt = Lengths(mean=data.max_isl, max=data.max_isl) if data.max_isl else None
        return prompt, data.osl
    if kind == "multi_turn":  # the last turn: system, every earlier turn, a question
        turn = data.question_len.mean + data.answer_len.mean
        mean = data.system_prompt_len + (data.turns - 1) * turn + data.question_len.mean
        top = (data.question_len.max or data.question_len.mean) + (
            data.answer_len.max or data.answer_len.mean
        )
        longest = data.system_prompt_len + (data.turns - 1) * top + top
        return Lengths(mean=mean, max=longest), data.osl
    if kind == "doc_qa":
        question = data.question_len
        return Lengths(
            mean=data.doc_len + question.mean, max=data.doc_len + (question.max or question.mean)
        ), data.osl
    return None, None


@dataclass(frozen=True)
class WorkloadPoints:
    """A workload's points as the planner sees them: mean lengths, each concurrency."""

    name: str
    points: list[ServingPoint]
    longest: int  # the longest request (prompt + output) it can send
    slos: Slos


def workload_points(spec: PocSpec, workload: Workload) -> WorkloadPoints:
    """Unstated lengths (ShareGPT prompts, traces) are taken as 1024 in and 256 out."""
    prompt, output = _lengths_of(workload)
    isl, osl = _mean(prompt, 1024), _mean(output, 256)
    concurrencies = workload.load.concurrency or [workload.load.max_concurrency or 64]
    slo = {s.metric: s.max_ms for s in workload.slos if s.metric in ("ttft_ms", "tpot_ms")}
    return WorkloadPoints(
        workload.name,
        [ServingPoint(isl, osl, c) for c in concurrencies],
        _longest(prompt, 1024) + _longest(output, 256),
        Slos(slo.get("ttft_ms"), slo.get("tpot_ms")),
    )


def training_model(spec: PocSpec, shape: Shape) -> tuple[Training, TrainingPoint]:
    training = spec.training
    assert training is not None
    world = training.world_size or spec.cluster.total_gpus
    precision = _DTYPE[training.dtype]
    if training.framework == "megatron":
        mega = training.megatron or MegatronLayout()
        dp = max(1, world // mega.model_parallel)
        layout = Layout(
            tp=mega.tp,
            pp=mega.pp,
            cp=mega.cp,
            dp=dp,
            ep=mega.ep,
            vpp=mega.vpp or 1,
            zero=1 if mega.distributed_optimizer else 0,
            micro_batch=training.micro_batch,
            recompute=mega.recompute,
        )
        precision = "fp8" if mega.fp8 else precision
    else:
        dp = world
        layout = Layout(
            dp=world,
            zero=training.zero_stage,
            micro_batch=training.micro_batch,
            offload=training.offload,
        )
    model = Training(shape, layout, device_of(spec), training.framework, precision)
    point = TrainingPoint(training.seq_len, training.micro_batch * training.grad_accum * dp)
    return model, point


def pool_spec(spec: PocSpec, role: str) -> PocSpec:
    """One instance of a disaggregated pool as an aggregated spec: the pool's layout as
    ``serving.parallelism``, its engine arguments over the deployment's, the cluster cut to
    the instance's GPUs (what the memory rule, the planner and the adapters read)."""
    serving = spec.serving
    assert serving is not None and serving.disaggregation is not None
    pool = getattr(serving.disaggregation, role)
    par = serving.parallelism.model_copy(
        update={"tp": pool.tp, "dp": pool.dp, "ep": pool.ep, "dp_attention": pool.dp_attention}
    )
    per_node = spec.cluster.gpus_per_node
    nodes = max(1, pool.gpus // per_node)
    cluster = spec.cluster.model_copy(
        update={"nodes": nodes, "gpus_per_node": min(pool.gpus, per_node), "hosts": []}
    )
    changed = serving.model_copy(
        update={
            "parallelism": par,
            "engine_args": {**serving.engine_args, **pool.engine_args},
            "disaggregation": None,
        }
    )
    variant = spec.model_copy(update={"serving": changed, "cluster": cluster})
    variant._file, variant._hash = spec._file, spec._hash
    return variant
