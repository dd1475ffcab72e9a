"""Memory per GPU for a layout: what serving leaves for the KV cache and how many tokens
and requests fit; what training needs for model states (DeepSpeed ZeRO 0-3, offload) and
activations (Megatron-style TP/PP/CP/EP, recompute)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from pocforge.plan.hardware import Device, calibration, framework_calibration
from pocforge.plan.layout import KV_BYTES, WEIGHT_BYTES, Layout
from pocforge.plan.shape import Shape

GB = 1e9


# --------------------------------------------------------------------------- weights
def layer_weight_bytes(shape: Shape, layout: Layout, precision: str, moe: bool) -> float:
    """One layer's weights on one GPU of the replica."""
    w = WEIGHT_BYTES[precision]
    attention = shape.attention_params * w["attention"] / layout.attention_tp
    if not moe:
        return attention + shape.dense_mlp_params * w["mlp"] / layout.tp
    experts = shape.experts * shape.expert_params * w["mlp"]
    experts /= layout.ep if layout.ep > 1 else layout.tp
    shared = shape.shared_params * w["mlp"] / layout.tp
    return attention + experts + shared + shape.router_params * 2


def stage_layers(shape: Shape, layout: Layout) -> tuple[int, int]:
    """(dense, MoE) layers of the largest pipeline stage (stages split layers evenly, the
    dense ones first, as Megatron and vLLM do)."""
    per_stage = math.ceil(shape.layers / layout.pp)
    dense = min(per_stage, shape.dense_layers)
    return dense, per_stage - dense


def weight_bytes_per_gpu(shape: Shape, layout: Layout, precision: str) -> float:
    """Weights on the fullest GPU: the first pipeline stage (dense layers, embedding; the
    LM head too with one stage)."""
    dense, moe = stage_layers(shape, layout)
    layers = dense * layer_weight_bytes(shape, layout, precision, False)
    layers += moe * layer_weight_bytes(shape, layout, precision, shape.is_moe)
    ends = shape.embedding_params + (shape.head_params if layout.pp == 1 else 0)
    return layers + ends * WEIGHT_BYTES[precision]["embedding"] / layout.tp


def model_weight_bytes(shape: Shape, precision: str) -> float:
    """The whole model's weights in ``precision``."""
    one = Layout()
    dense, moe = shape.dense_layers, shape.moe_layers
    total = dense * layer_weight_bytes(shape, one, precision, False)
    total += moe * layer_weight_bytes(shape, one, precision, shape.is_moe)
    return (
        total + (shape.embedding_params + shape.head_params) * WEIGHT_BYTES[precision]["embedding"]
    )


# --------------------------------------------------------------------------- KV cache
def kv_bytes_per_token_per_gpu(shape: Shape, layout: Layout, kv_dtype: str) -> float:
    """One token's KV cache on one GPU of the attention group holding it: its layers of
    the stage, its share of the KV heads (a head is replicated when TP exceeds the KV
    heads; MLA's latent is one per token, replicated on every TP rank)."""
    layers = math.ceil(shape.layers / layout.pp) / shape.layers
    nbytes = KV_BYTES[kv_dtype]
    if shape.is_mla:
        return shape.kv_bytes_per_token(nbytes) * layers
    heads_here = math.ceil(shape.kv_heads / layout.attention_tp)
    return shape.kv_bytes_per_token(nbytes) * layers * heads_here / shape.kv_heads


@dataclass(frozen=True)
class ServingMemory:
    """Per-GPU memory of a serving layout (bytes) and what fits in it."""

    capacity: float  # what the engine may take: memory × its fraction
    weights: float
    activations: float
    workspace: float
    kv_per_token: float  # on one GPU of an attention group
    attention_groups: int

    @property
    def kv_budget(self) -> float:
        return self.capacity - self.weights - self.activations - self.workspace

    @property
    def tokens(self) -> int:
        """KV-cache tokens the replica holds (every attention group together)."""
        if self.kv_budget <= 0:
            return 0
        return int(self.kv_budget / self.kv_per_token) * self.attention_groups

    def requests(self, tokens_each: int) -> int:
        """Requests of ``tokens_each`` tokens whose KV caches fit at once (a request does
        not span attention groups)."""
        if self.kv_budget <= 0 or tokens_each <= 0:
            return 0
        return int(self.tokens // self.attention_groups // tokens_each) * self.attention_groups

    def headroom(self, tokens_each: int) -> float:
        """Fraction of the capacity left after the weights, activations and one request."""
        one = self.kv_per_token * tokens_each
        return (self.kv_budget - one) / self.capacity if self.capacity else -1.0

    def as_dict(self) -> dict:
        return {
            "capacity_gb": round(self.capacity / GB, 2),
            "weights_gb": round(self.weights / GB, 2),
            "activations_gb": round(self.activations / GB, 2),
            "workspace_gb": round(self.workspace / GB, 2),
            "kv_cache_gb": round(max(self.kv_budget, 0) / GB, 2),
            "kv_bytes_per_token_per_gpu": round(self.kv_per_token, 1),
            "kv_tokens": self.tokens,
        }


def serving_memory(
    shape: Shape,
    layout: Layout,
    device: Device,
    framework: str,
    precision: str = "bf16",
    kv_dtype: str = "bf16",
    memory_fraction: float | None = None,
    max_batched_tokens: int | None = None,
) -> ServingMemory:
    """The engine's memory on its fullest GPU. Activations: one forward of
    ``max_batched_tokens`` (the profile run vLLM and SGLang size the cache after): the
    residual stream and attention output (4·hidden), the local MLP intermediate (3 of its
    width: gate, up and their product) and the local logits of a sampled batch, in bf16."""
    cal = framework_calibration(framework)
    fraction = memory_fraction if memory_fraction is not None else cal["memory_fraction"]
    tokens = max_batched_tokens or cal["max_batched_tokens"]
    if device.is_cpu:
        # the CPU engines keep the KV cache in a space of its own (VLLM_CPU_KVCACHE_SPACE)
        return ServingMemory(
            capacity=device.memory_bytes,
            weights=0.0,
            activations=0.0,
            workspace=0.0,
            kv_per_token=kv_bytes_per_token_per_gpu(shape, layout, kv_dtype),
            attention_groups=layout.attention_groups,
        )
    width = shape.facts.moe_intermediate if shape.is_moe else shape.facts.intermediate
    local = (width or 4 * shape.hidden) * (shape.top_k or 1) / layout.tp
    activations = tokens * (4 * shape.hidden + 3 * local) * 2
    activations += 256 * shape.facts.vocab / layout.tp * 4  # fp32 logits of 256 sequences
    return ServingMemory(
        capacity=device.memory_bytes * fraction,
        weights=weight_bytes_per_gpu(shape, layout, precision),
        activations=activations,
        workspace=calibration()["workspace_gb"] * GB,
        kv_per_token=kv_bytes_per_token_per_gpu(shape, layout, kv_dtype),
        attention_groups=layout.attention_groups,
    )


# --------------------------------------------------------------------------- training
def zero_model_states(
    params: int,
    gpus: int,
    gpus_per_node: int,
    stage: int,
    offload: str = "none",
    largest_layer: int = 0,
    zero_init: bool = True,
    buffer_factor: float = 1.5,
) -> tuple[float, float]:
    """(GPU bytes per GPU, CPU bytes per node) of model states under ZeRO ``stage``, with
    DeepSpeed's own accounting: 2 bytes of 16-bit parameters plus 18 of 16-bit and fp32
    gradients, fp32 master weights and Adam's two moments per parameter. Stages 2 and 3 are
    DeepSpeed's ``estimate_zero2_model_states_mem_needs`` and
    ``estimate_zero3_model_states_mem_needs`` term for term (the tests compare them); it
    ships none for 0 and 1, which follow the same accounting (stage 1 shards the 16 bytes
    of fp32 gradients, master weights and moments; stage 0 shards nothing)."""
    nodes = max(1, math.ceil(gpus / gpus_per_node))
    offload_optimizer = offload != "none"  # parameters only is not a DeepSpeed setting
    offload_params = offload in ("parameters", "both")
    if stage == 0:
        return 20.0 * params, 0.0
    if stage == 1:
        if offload_optimizer:
            return 4.0 * params, params * max(4 * gpus, 16) * buffer_factor
        return 4.0 * params + int(16 * params / gpus), 0.0
    if stage == 2:
        if offload_optimizer:
            return 2.0 * params, params * max(4 * gpus, 16) * buffer_factor
        return 2.0 * params + int(18 * params / gpus), params * 4 * gpus_per_node * buffer_factor
    layer = 4.0 * largest_layer
    per_node = 1 / nodes
    if offload_params:
        gpu = layer
        factor = 18 * per_node if zero_init else max(4 * gpus_per_node, 18 * per_node)
        cpu = params * factor
    elif offload_optimizer:
        gpu = layer + int(2 * params / gpus)
        factor = 16 * per_node if zero_init else max(4 * gpus_per_node, 16 * per_node)
        cpu = params * factor
    else:
        gpu = layer + int(18 * params / gpus)
        cpu = (largest_layer if zero_init else params) * 4 * gpus_per_node
    return gpu, cpu * buffer_factor


def activation_bytes_per_gpu(shape: Shape, layout: Layout, seq_len: int) -> float:
    """Activations of one GPU in 16-bit training (Korthikanti et al., "Reducing Activation
    Recomputation in Large Transformer Models", 2022, table 2, with flash attention so the
    score matrix is not kept): per layer and micro-batch ``s·b·h·34 / t`` with sequence
    parallelism (``s`` split further by CP), ``2·s·b·h`` with full recompute; the first of
    ``pp`` 1F1B stages holds ``pp`` micro-batches of its layers, i.e. every layer's worth."""
    s = seq_len / layout.cp
    b = layout.micro_batch
    h = shape.hidden
    if layout.recompute == "full":
        per_layer = 2 * s * b * h
    else:
        per_layer = s * b * h * 34 / layout.tp
        if shape.is_moe:  # the routed tokens' expert activations (top_k of them)
            width = shape.facts.moe_intermediate or shape.facts.intermediate or 4 * h
            per_layer += s * b * shape.top_k * (2 * h + 3 * width) * 2 / max(layout.tp, 1) / 4
    # the first stage holds pp micro-batches in flight (interleaved: (1 + (pp-1)/(pp·vpp)) more)
    layers_held = math.ceil(shape.layers / layout.pp) * layout.pp
    if layout.vpp > 1:
        layers_held *= 1 + (layout.pp - 1) / (layout.pp * layout.vpp)
    logits = s * b * shape.facts.vocab * 4 / layout.tp  # fp32 logits on the last stage
    return per_layer * layers_held + logits


@dataclass(frozen=True)
class TrainingMemory:
    states: float  # per GPU
    activations: float
    cpu_per_node: float
    capacity: float

    @property
    def total(self) -> float:
        return self.states + self.activations

    @property
    def fits(self) -> bool:
        return self.total <= self.capacity

    def as_dict(self) -> dict:
        return {
            "capacity_gb": round(self.capacity / GB, 2),
            "model_states_gb": round(self.states / GB, 2),
            "activations_gb": round(self.activations / GB, 2),
            "cpu_per_node_gb": round(self.cpu_per_node / GB, 2),
        }


def training_memory(shape: Shape, layout: Layout, device: Device, seq_len: int) -> TrainingMemory:
    """Model states sharded by TP × PP (and EP for the experts), then by ZeRO over the
    data-parallel (× CP) ranks; activations for the micro-batch."""
    model_parallel = layout.tp * layout.pp
    params = shape.params / model_parallel
    if shape.is_moe and layout.ep > 1:
        expert_total = shape.moe_layers * shape.experts * shape.expert_params
        params = (shape.params - expert_total) / model_parallel + expert_total / (
            model_parallel * layout.ep
        )
    dp = layout.dp * layout.cp
    largest = max(shape.attention_params + shape.dense_mlp_params, shape.embedding_params)
    states, cpu = zero_model_states(
        int(params),
        max(dp, 1),
        min(device.gpus_per_node, max(dp, 1)),
        layout.zero,
        layout.offload,
        largest_layer=largest // model_parallel,
    )
    slack = calibration()["training"]["activation_slack"]
    capacity = (
        device.gpu.hbm_gb * GB if device.gpu.is_gpu else calibration()["cpu"]["memory_gb"] * GB
    )
    return TrainingMemory(
        states=states,
        activations=activation_bytes_per_gpu(shape, layout, seq_len) * slack,
        cpu_per_node=cpu,
        capacity=capacity,
    )
