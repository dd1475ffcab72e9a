"""Cross-field rules of the training section: the world fits the cluster, each framework's
own fields, Megatron's layout (:data:`pocforge.spec.rules.RULES`)."""

from __future__ import annotations

from collections.abc import Iterator

from pocforge.spec.finding import Finding
from pocforge.spec.planning import facts_of
from pocforge.spec.schema import PocSpec
from pocforge.spec.training_schema import MegatronLayout


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


DEEPSPEED_ONLY = ("zero_stage", "offload", "ds_config")


def training_framework_fields(spec: PocSpec) -> Iterator[Finding]:
    """DeepSpeed's fields only with DeepSpeed, the ``megatron`` block only with Megatron."""
    training = spec.training
    if training is None:
        return
    if training.framework == "megatron":
        for name in DEEPSPEED_ONLY:
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


def training_init_fits(spec: PocSpec) -> Iterator[Finding]:
    """``training.init`` starts Megatron from a checkpoint; a Megatron folder is named by
    its absolute path on the nodes."""
    training = spec.training
    if training is None or training.init is None:
        return
    where = ("training", "init")
    if training.framework != "megatron":
        yield (
            where,
            f"training.init is implemented for framework: megatron; the kit's {training.framework} "
            "driver trains fresh weights: remove init, or train with framework: megatron",
        )
    elif training.init.format == "megatron" and not training.init.checkpoint.startswith("/"):
        yield (
            (*where, "checkpoint"),
            f"a Megatron checkpoint is a folder on every node: give its absolute path, not "
            f"{training.init.checkpoint!r}",
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
    if facts.rope_scaling not in (None, "llama3"):
        yield (
            ("model",),
            f"the model's RoPE scaling {facts.rope_scaling!r} has no Megatron-LM flag the kit "
            "sets (llama3 only); Megatron would train it without: use another framework",
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
