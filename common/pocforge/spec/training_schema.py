"""The spec's `training:` section: DeepSpeed or Megatron, its layout, data, targets and profile.

Every field has a description; ``pocs/SPEC.md`` is generated from them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    model_validator,
)

from pocforge.spec.base import ProfilerChoice, Strict
from pocforge.spec.serving_schema import Runtime


class TrainingTargets(Strict):
    tokens_per_s_per_gpu: float | None = Field(
        None, gt=0, description="Throughput the customer expects."
    )
    mfu: float | None = Field(
        None, gt=0, le=1, description="Model FLOPs utilisation expected (0–1)."
    )


class MegatronData(Strict):
    """Where Megatron reads its tokens: mock data, or a preprocessed dataset on every node."""

    kind: Literal["mock", "dataset"] = Field(
        "mock",
        description="`mock`: Megatron's `--mock-data` with the `NullTokenizer` (random tokens, the throughput benchmark); `dataset`: a preprocessed Megatron dataset (`--data-path`).",
    )
    path: str | None = Field(
        None,
        description="dataset: the prefix of the `.bin`/`.idx` pair on every node (`--data-path`).",
    )
    tokenizer: str | None = Field(
        None,
        description="dataset: a Hugging Face tokenizer folder or id on the nodes (`--tokenizer-type HuggingFaceTokenizer --tokenizer-model`).",
    )

    @model_validator(mode="after")
    def _dataset_needs_path(self) -> MegatronData:
        if self.kind == "dataset" and not (self.path and self.tokenizer):
            raise ValueError("a `dataset` needs both `path` and `tokenizer`")
        if self.kind == "mock" and (self.path or self.tokenizer):
            raise ValueError("`path` and `tokenizer` are for `kind: dataset`; mock data has none")
        return self


# Where each entry's code is in the published images (see MegatronLayout.path).
CHECKOUTS = {"megatron-lm": "/workspace/Megatron-LM", "primus": "/workspace/Primus"}


class MegatronLayout(Strict):
    """Megatron-LM's parallel layout and switches; data parallelism is what the world size
    leaves: `dp = world / (tp · pp · cp)`."""

    tp: int = Field(1, ge=1, description="Tensor parallel size (`--tensor-model-parallel-size`).")
    pp: int = Field(
        1, ge=1, description="Pipeline parallel size (`--pipeline-model-parallel-size`)."
    )
    vpp: int | None = Field(
        None,
        ge=2,
        description="Virtual pipeline stages per pipeline rank (interleaved 1F1B); needs `pp > 1` and layers divisible by `pp · vpp`.",
    )
    cp: int = Field(1, ge=1, description="Context parallel size (`--context-parallel-size`).")
    cp_comm_type: Literal["p2p", "a2a", "allgather", "a2a+p2p"] = Field(
        "p2p", description="How context-parallel ranks exchange keys and values (`--cp-comm-type`)."
    )
    ep: int = Field(
        1, ge=1, description="Expert parallel size (`--expert-model-parallel-size`); MoE only."
    )
    expert_tp: int | None = Field(
        None,
        ge=1,
        description="Tensor parallel size inside each expert (`--expert-tensor-parallel-size`); default: Megatron's (equal to `tp`).",
    )
    sequence_parallel: bool = Field(
        False, description="Megatron sequence parallelism (`--sequence-parallel`); needs `tp > 1`."
    )
    recompute: Literal["none", "selective", "full"] = Field(
        "none",
        description="Activation recompute: `selective` (attention core) or `full` (every layer, uniform, one layer per chunk).",
    )
    distributed_optimizer: bool = Field(
        False,
        description="Shard the optimizer state over data-parallel ranks (`--use-distributed-optimizer`).",
    )
    fp8: Literal["hybrid", "e4m3"] | None = Field(
        None,
        description="FP8 training with Transformer Engine (`--fp8-format`, `--transformer-impl transformer_engine`); GPUs with FP8 only.",
    )
    entry: Literal["megatron-lm", "primus"] = Field(
        "megatron-lm",
        description="What runs on the nodes: Megatron-LM's `pretrain_gpt.py` (ROCm/Megatron-LM or NVIDIA's container) or AMD Primus's Megatron backend.",
    )
    path: str | None = Field(
        None,
        description="The checkout on the nodes of what `entry` runs; default: where the kit's image catalog says the image keeps it (AMD's rocm/primus images: Primus at `/workspace/Primus`, its Megatron-LM at `/workspace/Primus/third_party/Megatron-LM`), else by entry: Megatron-LM at `/workspace/Megatron-LM` (NGC's containers with the checkout mounted there, ROCm's rocm/megatron-lm images), Primus at `/workspace/Primus`.",
    )
    data: MegatronData = Field(
        default_factory=MegatronData, description="Mock data or a preprocessed dataset."
    )
    extra_args: list[str] = Field(
        default_factory=list,
        description="More Megatron-LM arguments, appended as written (checked by Megatron's parser where it is installed).",
    )

    def checkout(self, in_image: dict[str, str]) -> str:
        """Where ``entry``'s code is on the nodes: ``path``, else where the image keeps it
        (``in_image``: the catalog's checkouts of the runtime's image), else the entry's
        usual place."""
        return self.path or in_image.get(self.entry) or CHECKOUTS[self.entry]

    @property
    def model_parallel(self) -> int:
        return self.tp * self.pp * self.cp


class TrainingInit(Strict):
    """Train on from a checkpoint (continued pretraining, fine-tuning) instead of fresh
    weights. A Hugging Face checkpoint is converted to the framework's format first, on
    every node, once (the converted folder is kept and reused)."""

    checkpoint: str = Field(
        "model",
        description="`model`: the POC's own weights (`model.weights` where staged, else `model.id`); else a Hugging Face folder or hub id, or (`format: megatron`) a Megatron checkpoint folder, on every node.",
    )
    format: Literal["hf", "megatron"] = Field(
        "hf",
        description="`hf`: a Hugging Face checkpoint, converted by Megatron-Bridge's `convert_checkpoints.py import` (on `cpu`, by the kit's importer) into a Megatron-Core distributed checkpoint; `megatron`: a Megatron checkpoint folder, loaded as it is.",
    )
    bridge_path: str = Field(
        "/opt/Megatron-Bridge",
        description="Megatron-Bridge's checkout in the training image (NVIDIA's NeMo containers keep it at `/opt/Megatron-Bridge`); GPU nodes run its `examples/conversion/convert_checkpoints.py`.",
    )

    @model_validator(mode="after")
    def _megatron_needs_a_folder(self) -> TrainingInit:
        if self.format == "megatron" and self.checkpoint == "model":
            raise ValueError(
                "`format: megatron` loads a Megatron checkpoint folder: set `checkpoint` to "
                "its path on the nodes (the model's own weights are `format: hf`)"
            )
        return self


class TrainingProfile(ProfilerChoice):
    steps: list[Annotated[int, Field(ge=0)]] = Field(
        min_length=1,
        description="Steps to profile, counted from 0: the profiler runs from the first to the last of them (`[2, 3]`: steps 2 and 3).",
    )


class TrainingSpec(Strict):
    framework: Literal["deepspeed", "megatron"] = Field(
        description="Training framework: DeepSpeed (ZeRO) or Megatron-LM / Megatron-Core."
    )
    version: str | None = Field(
        None,
        description="Exact framework version: the version its nodes run (held, as `serving.version`, to the image's or the kit's CPU environment's; bring-up's venv installs it).",
    )
    zero_stage: Literal[0, 1, 2, 3] = Field(2, description="DeepSpeed ZeRO stage.")
    offload: Literal["none", "optimizer", "parameters", "both"] = Field(
        "none", description="ZeRO offload to CPU memory."
    )
    megatron: MegatronLayout | None = Field(
        None,
        description="Megatron's layout and switches (`framework: megatron`); default: every GPU data parallel.",
    )
    init: TrainingInit | None = Field(
        None,
        description="Start from a checkpoint (`{}`: the POC's own model weights) instead of fresh weights; unset: fresh weights, the throughput benchmark.",
    )
    dtype: Literal["bfloat16", "float16", "float32"] = Field(
        "bfloat16", description="Training precision."
    )
    world_size: int | None = Field(
        None, ge=1, description="Processes (GPUs) training; default: every GPU of the cluster."
    )
    micro_batch: int = Field(1, ge=1, description="Sequences per GPU per micro-step.")
    grad_accum: int = Field(1, ge=1, description="Gradient accumulation steps.")
    global_batch: int | None = Field(
        None,
        ge=1,
        description="Sequences per optimizer step over every data-parallel rank (Megatron's `--global-batch-size`); sets `grad_accum` to global_batch / (micro_batch · dp), which must divide it.",
    )

    def data_parallel(self, gpus: int) -> int:
        """Data-parallel ranks of this training on a cluster of ``gpus``: what the world
        leaves after Megatron's tp·pp·cp (DeepSpeed: every rank)."""
        world = self.world_size or gpus
        return world // self.megatron.model_parallel if self.megatron else world

    seq_len: int = Field(ge=1, description="Tokens per sequence.")
    steps: int = Field(ge=1, description="Optimizer steps to run.")
    warmup_steps: int = Field(1, ge=0, description="Steps excluded from throughput.")
    lr: float = Field(1e-4, gt=0, description="Learning rate (AdamW).")
    gradient_clipping: float = Field(1.0, ge=0, description="Gradient norm clip; 0 disables.")
    timeout_s: float | None = Field(
        None,
        gt=0,
        description="Seconds the whole training run may take before it is stopped; default: startup (as for serving) plus every step at 5% of the GPU's peak (`pocforge.frameworks.startup`).",
    )
    ds_config: dict[str, Any] = Field(
        default_factory=dict,
        description="Extra DeepSpeed config keys, merged over the generated ones.",
    )
    targets: TrainingTargets = Field(
        default_factory=TrainingTargets, description="Customer targets."
    )
    runtime: Runtime = Field(
        default_factory=Runtime, description="Where the training ranks run on each node."
    )
    profile: TrainingProfile | None = Field(
        None,
        description="Profile these steps on every rank: torch.profiler (a Chrome trace and the table of operations per rank in `training/profile/`), or `tool: nsys | rocprofv3` around the launch.",
    )
