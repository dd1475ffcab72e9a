"""Predicted training performance of a layout: step time, tokens/s/GPU, TFLOP/s/GPU, MFU.

Model FLOPs per token are ``3 × (2·N_matmul + attention)`` (forward, and a backward of
twice the forward), attention counted causally (half the score matrix), as Megatron-LM's
``num_floating_point_operations`` and torchtitan count them; full recompute adds a
forward the MFU does not count. The step:

- compute: the GPU's share of the step's FLOPs at ``matrix_eff`` for the GEMMs, attention
  at flash attention's share of the peak, and the memory-bound rest (norms, activations,
  rotary, residuals, casts) as ``elementwise_passes`` reads and writes of each token's
  hidden vector per layer at HBM speed (``calibration.yaml``): it grows with the hidden
  size while the GEMMs grow with its square, so it weighs more on small models;
- the pipeline bubble of 1F1B, ``(pp-1)/(v·m+pp-1)`` of the step for ``m`` micro-batches
  and ``v`` virtual stages per GPU (Megatron's interleaved schedule; its extra stage-to-stage
  sends are counted with the TP traffic's exposure);
- communication, each with the share not hidden behind compute: TP's two all-reduces
  per layer in the forward and two in the backward (sequence parallel: the same volume as
  reduce-scatter + all-gather), the data-parallel gradient all-reduce (ZeRO-3: parameter
  all-gathers in forward and backward, and a reduce-scatter), EP's dispatch and combine,
  CP's ring of KV blocks.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from pocforge.plan.hardware import Device, calibration
from pocforge.plan.layout import Layout
from pocforge.plan.memory import training_memory
from pocforge.plan.shape import Shape

ASSUMPTIONS = (
    "model FLOPs = 6·N_matmul·tokens + causal attention (Megatron-LM's count)",
    "1F1B pipeline schedule (interleaved with vpp > 1); bubble (pp-1)/(vpp·m+pp-1)",
    "communication partly hidden behind compute (calibration.yaml training.exposed)",
    "MFU against the dense peak of the training precision",
)


@dataclass(frozen=True)
class TrainingPoint:
    seq_len: int
    global_batch: int  # sequences per optimizer step


@dataclass
class TrainingPrediction:
    layout: str
    gpus: int
    fits: bool
    step_s: float
    tokens_per_s_per_gpu: float
    tflops_per_gpu: float
    mfu: float
    memory: dict
    breakdown: dict
    why: str | None = None
    assumptions: list[str] = field(default_factory=lambda: list(ASSUMPTIONS))

    def as_dict(self) -> dict:
        out = asdict(self)
        for key in ("step_s", "tokens_per_s_per_gpu", "tflops_per_gpu", "mfu"):
            out[key] = round(out[key], 4)
        return out


def model_flops_per_token(shape: Shape, seq_len: int) -> float:
    return 3 * (2 * shape.matmul_params + shape.attention_flops(seq_len, causal_prefill=True))


@dataclass(frozen=True)
class Training:
    shape: Shape
    layout: Layout
    device: Device
    framework: str = "megatron"
    precision: str = "bf16"

    def _compute_seconds(self, global_batch: int, seq_len: int) -> float:
        """GPU-seconds of a step's compute: the GEMMs at the precision's achievable rate
        (routed experts at ``moe_efficiency`` of it), attention at flash attention's share
        of the bf16 peak, and the memory-bound rest (norms, activations, rotary, residuals,
        the casts around fp8 GEMMs): ``elementwise_passes`` bf16 reads and writes of a
        token's hidden vector per layer, forward and backward, at HBM speed."""
        shape, dev = self.shape, self.device
        cal = calibration()["training"]
        tokens = global_batch * seq_len
        experts = 6.0 * tokens * shape.moe_layers * shape.top_k * shape.expert_params
        matmul = 6.0 * tokens * shape.matmul_params - experts
        attention = 3.0 * tokens * shape.attention_flops(seq_len, causal_prefill=True)
        rate = dev.flops(self.precision)
        gemm = matmul / rate + self._expert_seconds(global_batch, seq_len) / cal["moe_efficiency"]
        attend = attention / (dev.peak_flops("bf16") * cal["attention_efficiency"])
        other = cal["elementwise_passes"] * tokens * shape.layers * shape.hidden * 2 / dev.mem_bw
        return gemm + attend + other

    def _expert_seconds(self, global_batch: int, seq_len: int) -> float:
        """GPU-seconds of the routed experts' GEMMs (forward and backward), each a roofline
        of its own. Per micro-batch a GPU runs its ``experts / ep`` experts on
        ``ep × tokens × top_k / experts`` rows each, often too few to be compute-bound
        (Qwen3-30B-A3B's 768-wide experts are memory-bound on every GPU), so an expert's
        weights and activations are read at HBM speed."""
        shape, dev, layout = self.shape, self.device, self.layout
        if not shape.is_moe:
            return 0.0
        width = shape.facts.moe_intermediate or shape.facts.intermediate or 4 * shape.hidden
        width /= 1 if layout.ep > 1 else layout.tp
        tokens = layout.micro_batch * seq_len / layout.cp
        rows = max(1.0, layout.ep * tokens * shape.top_k / shape.experts)
        h = shape.hidden
        flops = 2 * rows * h * width * 3  # gate, up, down
        nbytes = 2 * (3 * h * width + rows * (2 * h + 3 * width))
        one = max(flops / dev.flops(self.precision), nbytes / dev.mem_bw)
        micro_batches = max(1, global_batch // (layout.dp * layout.micro_batch))
        layers = math.ceil(shape.moe_layers / layout.pp)
        calls = 3 * layers * micro_batches * shape.experts / layout.ep
        return one * calls * layout.gpus

    def predict(self, point: TrainingPoint) -> TrainingPrediction:
        shape, layout, dev = self.shape, self.layout, self.device
        cal = calibration()["training"]
        exposed = cal["exposed"]
        gpus = layout.gpus
        tokens = point.global_batch * point.seq_len
        flops = tokens * model_flops_per_token(shape, point.seq_len)
        compute = self._compute_seconds(point.global_batch, point.seq_len) / gpus
        if layout.recompute == "full":
            compute *= 4 / 3
        micro = max(1, point.global_batch // (layout.dp * layout.micro_batch))
        bubble = 0.0
        if layout.pp > 1:
            bubble = (layout.pp - 1) / (layout.vpp * micro + layout.pp - 1)

        tokens_gpu = tokens / (layout.dp * layout.cp)  # tokens each model replica's shard sees
        layers_stage = math.ceil(shape.layers / layout.pp)
        act = layout.micro_batch * point.seq_len / layout.cp * shape.hidden * 2
        per_micro_tp = 4 * layers_stage * dev.all_reduce(act, layout.tp)
        tp = per_micro_tp * micro * exposed["tp"]

        params_gpu = shape.params / (layout.tp * layout.pp)
        dp_group = layout.dp * layout.cp
        if layout.zero == 3:
            dp = (
                2 * dev.all_gather(params_gpu * 2, dp_group)
                + dev.all_gather(params_gpu * 2, dp_group)
            ) * exposed["zero3_gather"]
        else:
            dp = dev.all_reduce(params_gpu * 2, dp_group) * exposed["dp"]

        ep = 0.0
        if shape.is_moe and layout.ep > 1:
            moe_stage = layers_stage * shape.moe_layers / shape.layers
            routed = tokens_gpu / layout.pp * shape.top_k * shape.hidden * 2 / layout.tp
            ep = 4 * moe_stage * dev.all_to_all(routed, layout.ep) * exposed["ep"]
        cp = 0.0
        if layout.cp > 1:
            kv = point.seq_len / layout.cp * shape.kv_width * 2 * layout.micro_batch
            cp = 3 * layers_stage * micro * (layout.cp - 1) * dev.send(kv, False) * exposed["cp"]

        step = compute / (1 - bubble) + tp + dp + ep + cp
        step += dev.step_overhead(self.framework) if dev.is_cpu else 0.0
        memory = training_memory(shape, layout, dev, point.seq_len)
        fits = memory.fits
        why = None
        if not fits:
            why = (
                f"model states {memory.states / 1e9:.1f} GB + activations "
                f"{memory.activations / 1e9:.1f} GB per GPU exceed {memory.capacity / 1e9:.0f} GB"
            )
        achieved = flops / step / gpus
        return TrainingPrediction(
            layout=layout.label(),
            gpus=gpus,
            fits=fits,
            step_s=step,
            tokens_per_s_per_gpu=tokens / step / gpus,
            tflops_per_gpu=achieved / 1e12,
            mfu=achieved / dev.peak_flops(self.precision),
            memory=memory.as_dict(),
            breakdown={
                "compute_s": round(compute, 4),
                "bubble": round(bubble, 4),
                "tp_s": round(tp, 4),
                "dp_s": round(dp, 4),
                "ep_s": round(ep, 4),
                "cp_s": round(cp, 4),
            },
            why=why,
        )
