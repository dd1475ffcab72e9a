"""``summary.json`` of a training benchmark: throughput, MFU, memory, the loss curve.

Versioned; the definitions travel with the numbers (shared/STYLE.md #9).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pocforge.metrics import METRICS

SCHEMA_VERSION = 2  # 2: Megatron runs (parallel layout, framework's own figures)


class StepRecord(BaseModel):
    step: int
    loss: float = Field(
        description="Mean loss over ranks and micro-batches of this optimizer step."
    )
    seconds: float = Field(description="Wall time of the optimizer step (all micro-batches).")
    ended_unix_s: float | None = Field(
        None,
        description="Unix time the step ended on rank 0 (the clock the telemetry is in); "
        "None where the run's log gives no such time.",
    )


class TrainingSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    kind: str = "training"
    status: str = Field(description="completed | failed | interrupted")
    framework: str = Field("deepspeed", description="deepspeed | megatron")
    framework_version: str = Field(description="As the run reported it; 'unknown' if it did not.")
    torch_version: str
    device: str = Field(description="cpu, or the GPU type from the catalog.")
    world_size: int
    zero_stage: int | None = Field(None, description="DeepSpeed's ZeRO stage (DeepSpeed runs).")
    offload: str | None = Field(None, description="DeepSpeed's ZeRO offload (DeepSpeed runs).")
    parallel: dict[str, Any] = Field(
        default_factory=dict,
        description="Megatron's layout: tp, pp, cp, dp, ep, vpp, sequence_parallel, recompute, distributed_optimizer.",
    )
    dtype: str
    micro_batch: int
    grad_accum: int
    seq_len: int
    steps: int
    warmup_steps: int
    parameters: int = Field(description="Trainable parameters (all experts counted).")
    active_parameters: int = Field(
        description="Parameters one token passes through (MoE: top-k experts)."
    )
    flops_per_token: float = Field(description="Model FLOPs per trained token; see definitions.")
    tokens_per_step: int = Field(description="micro_batch × grad_accum × seq_len × world_size.")
    tokens_per_s: float | None
    tokens_per_s_per_gpu: float | None
    tflops_per_gpu: float | None
    peak_tflops: float | None = Field(
        description="Dense peak of the device for the dtype; None on CPU or fp32."
    )
    mfu: float | None
    peak_memory_gb: float | None
    peak_memory_kind: str = Field(description="device_allocated (GPU) or host_rss (CPU).")
    final_loss: float | None
    loss_curve: list[StepRecord]
    ds_config: dict[str, Any] | None = Field(
        None, description="DeepSpeed's config (DeepSpeed runs)."
    )
    reported: dict[str, float] = Field(
        default_factory=dict,
        description="The framework's own steady-state figures, as it printed them (Megatron: tflops_per_gpu from its own FLOP count, elapsed_ms).",
    )
    warnings: list[str] = Field(
        default_factory=list,
        description="What went wrong without spoiling the result (a rank that died at exit, after the summary was complete).",
    )
    definitions: dict[str, str]


def definitions() -> dict[str, str]:
    names = ["tokens_per_s_per_gpu", "tflops_per_gpu", "mfu", "peak_memory_gb", "final_loss"]
    found = {name: METRICS[("training", name)].definition for name in names}
    found["flops_per_token"] = (
        "6 × active non-embedding parameters + 6 × hidden × vocab (LM head) + 12 × layers × hidden × seq_len "
        "(attention scores and values, forward + backward; Chowdhery et al. 2022, PaLM, appendix B)."
    )
    return found
