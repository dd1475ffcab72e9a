"""Predicted serving performance of a layout at a concurrency: TTFT, TPOT and output
tokens/s per GPU, from a roofline per forward pass plus the collectives' alpha-beta costs.

The model, stated in every prediction's ``assumptions``:

- a decode step reads each GPU's weights once (the routed experts that the batch's tokens
  touch, ``E·(1-(1-k/E)^T)`` of them) and the batch's KV cache, and does 2 FLOPs per
  active parameter per token plus attention; its time is the larger of the memory and the
  compute time (roofline) at the GPU's achievable rates, plus two all-reduces per layer
  over the attention TP group, an expert dispatch and combine over EP, and the
  framework's host overhead per step;
- a prefill of ISL tokens is compute-bound (chunked by ``max_batched_tokens``, each chunk
  reading the weights once), spread over the replica's GPUs;
- continuous batching in a closed loop of ``concurrency`` clients (as the kit's sweep
  runs): prefills pause decoding (chunked prefill mixes them; the work is the same), so
  TPOT = step / (1 - ρ) with ρ the share of time spent prefilling, and a request waits
  for the prefills ahead of it; requests beyond what the KV cache holds queue;
- pipeline parallelism splits the batch into ``pp`` micro-batches in flight: a token
  crosses every stage, so TPOT is ``pp`` stage times of a micro-batch.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from pocforge.plan.hardware import Device, framework_calibration, serving_calibration
from pocforge.plan.layout import WEIGHT_BYTES, Layout
from pocforge.plan.memory import ServingMemory, kv_bytes_per_token_per_gpu, serving_memory
from pocforge.plan.shape import Shape

ASSUMPTIONS = (
    "continuous batching, closed loop of `concurrency` clients, chunked prefill",
    "decode step = roofline(max(bytes/HBM, FLOPs/matrix)) + TP all-reduces + EP all-to-all"
    " + host overhead",
    "prefill compute-bound at the matrix efficiency; TTFT includes waiting for earlier prefills",
    "p50 ≈ mean (the model predicts means)",
)


def doubling(ceiling: int) -> list[int]:
    """1, 2, 4, … below ``ceiling``, then ``ceiling`` (empty for 0): the concurrencies a
    search tries."""
    if ceiling < 1:
        return []
    powers = [1 << n for n in range(ceiling.bit_length()) if 1 << n <= ceiling]
    return sorted({*powers, ceiling})


@dataclass(frozen=True)
class ServingPoint:
    """One workload point: prompt and output lengths and the clients in flight."""

    isl: int
    osl: int
    concurrency: int


@dataclass
class ServingPrediction:
    layout: str
    gpus: int
    fits: bool
    ttft_ms: float
    tpot_ms: float
    output_tput_per_gpu: float
    running: int  # sequences decoding together (≤ concurrency, ≤ what the KV cache holds)
    max_concurrency: int
    memory: dict
    bound: str  # memory | compute (the decode step)
    why: str | None = None
    assumptions: list[str] = field(default_factory=lambda: list(ASSUMPTIONS))

    def as_dict(self) -> dict:
        out = asdict(self)
        for key in ("ttft_ms", "tpot_ms", "output_tput_per_gpu"):
            out[key] = round(out[key], 3)
        return out


@dataclass(frozen=True)
class Serving:
    """A model on a device in a layout; predicts any point."""

    shape: Shape
    layout: Layout
    device: Device
    framework: str = "vllm"
    precision: str = "bf16"
    kv_dtype: str = "bf16"
    memory_fraction: float | None = None
    max_batched_tokens: int | None = None
    max_batch: int | None = None  # sequences decoding at once; default: the framework's

    @property
    def batch_limit(self) -> int:
        return self.max_batch or framework_calibration(self.framework)["max_batch"]

    @property
    def memory(self) -> ServingMemory:
        return serving_memory(
            self.shape,
            self.layout,
            self.device,
            self.framework,
            self.precision,
            self.kv_dtype,
            self.memory_fraction,
            self.max_batched_tokens,
        )

    # -------------------------------------------------------------- one forward pass
    def _stage_weights_read(self, tokens: float) -> tuple[float, float]:
        """Bytes of weights one GPU reads for a forward of ``tokens`` tokens: (everything but
        the routed experts, the routed experts the tokens touch)."""
        shape, layout = self.shape, self.layout
        w = WEIGHT_BYTES[self.precision]
        per_stage = math.ceil(shape.layers / layout.pp)
        frac_dense = min(per_stage, shape.dense_layers) / max(per_stage, 1)
        attention = shape.attention_params * w["attention"] / layout.attention_tp
        dense_mlp = shape.dense_mlp_params * w["mlp"] / layout.tp
        other = per_stage * attention + per_stage * frac_dense * dense_mlp
        other += shape.embedding_params * w["embedding"] / layout.tp / layout.pp  # the LM head
        moe_layers = per_stage - per_stage * frac_dense if shape.is_moe else 0
        if not moe_layers:
            return other, 0.0
        local = shape.experts / layout.ep if layout.ep > 1 else shape.experts
        expert = shape.expert_params * w["mlp"] / (1 if layout.ep > 1 else layout.tp)
        touched = 1 - (1 - shape.top_k / shape.experts) ** max(tokens, 1)
        other += moe_layers * shape.shared_params * w["mlp"] / layout.tp
        return other, moe_layers * touched * local * expert

    def _forward(self, tokens: float, context: float, prefill: bool) -> tuple[float, str]:
        """Seconds of one forward of ``tokens`` tokens (the whole replica's batch) through one
        pipeline stage, each attending to ``context`` tokens; and what bounds it. The routed
        experts run at ``moe_efficiency`` of the rates (grouped GEMMs of a few rows per
        expert, and the busiest EP rank sets the pace); paged attention reads the KV cache
        at ``kv_read_efficiency`` of the bandwidth (gathers of scattered blocks); a decode
        step reaches ``decode_efficiency`` of the roofline (small-batch kernels)."""
        shape, layout, dev = self.shape, self.layout, self.device
        cal = serving_calibration()
        per_gpu = 1 / layout.gpus  # the batch's work spread over the replica's GPUs
        groups = layout.attention_groups
        expert_matmul = shape.moe_layers * shape.top_k * shape.expert_params
        dense_flops = tokens * (
            2 * (shape.matmul_params - expert_matmul)
            + shape.attention_flops(context, causal_prefill=prefill)
        )
        rate = dev.flops(self.precision)
        moe_eff = cal["moe_efficiency"]
        compute = (dense_flops + tokens * 2 * expert_matmul / moe_eff) * per_gpu / rate
        kv_read = 0.0
        if not prefill:
            kv_read = tokens / groups * context
            kv_read *= kv_bytes_per_token_per_gpu(shape, layout, self.kv_dtype)
        other, experts = self._stage_weights_read(tokens)
        kv_read /= cal["kv_read_efficiency"]
        memory = (other + experts / moe_eff + kv_read) / dev.mem_bw
        if not prefill:
            compute /= cal["decode_efficiency"]
            memory /= cal["decode_efficiency"]
        per_stage = math.ceil(shape.layers / layout.pp)
        act = tokens / groups * shape.hidden * 2
        comm = 2 * per_stage * dev.all_reduce(act, layout.attention_tp)
        if shape.is_moe and layout.ep > 1:
            moe_layers = per_stage * shape.moe_layers / shape.layers
            routed = tokens / layout.ep * shape.top_k * shape.hidden
            # dispatch in the weights' precision (fp8 under fp8/fp4), combine in bf16
            nbytes = routed * (min(WEIGHT_BYTES[self.precision]["attention"], 2) + 2)
            comm += moe_layers * (dev.all_to_all(nbytes, layout.ep) + 2 * dev.latency(layout.ep))
        bound = "compute" if compute > memory else "memory"
        return max(compute, memory) + comm, bound

    def prefill_time(self, isl: int) -> float:
        """Seconds to prefill one prompt alone (chunks of max_batched_tokens, stages in
        sequence)."""
        chunk = self.max_batched_tokens or 8192
        chunks = max(1, math.ceil(isl / chunk))
        # one request's prefill runs on one attention group's share of the replica
        share = self.layout.attention_groups
        seconds = 0.0
        for n in range(chunks):
            tokens = min(chunk, isl - n * chunk)
            t, _ = self._forward(tokens * share, n * chunk + tokens, prefill=True)
            seconds += t * self.layout.pp
        if self.layout.pp > 1:
            seconds += (self.layout.pp - 1) * self.device.send(
                isl * self.shape.hidden * 2, self._pp_across_nodes
            )
        return seconds + self.device.step_overhead(self.framework) * chunks

    @property
    def _pp_across_nodes(self) -> bool:
        return self.layout.gpus > self.device.gpus_per_node

    def decode_step(self, batch: int, context: float) -> tuple[float, str]:
        """Seconds between two tokens of a sequence when ``batch`` sequences decode together."""
        pp = self.layout.pp
        micro = max(batch / pp, 1)
        stage, bound = self._forward(micro, context, prefill=False)
        hop = (
            self.device.send(micro * self.shape.hidden * 2, self._pp_across_nodes) if pp > 1 else 0
        )
        return pp * (stage + hop) + self.device.step_overhead(self.framework), bound

    # -------------------------------------------------------------- a workload point
    def predict(self, point: ServingPoint) -> ServingPrediction:
        memory = self.memory
        longest = point.isl + point.osl
        capacity = memory.requests(longest)
        fits = capacity >= 1
        why = None
        if not fits:
            why = (
                f"weights {memory.weights / 1e9:.1f} GB + activations {memory.activations / 1e9:.1f} GB"
                f" + workspace {memory.workspace / 1e9:.1f} GB leave "
                f"{max(memory.kv_budget, 0) / 1e9:.2f} GB of {memory.capacity / 1e9:.1f} GB per GPU, "
                f"less than one request of {longest} tokens "
                f"({memory.kv_per_token * longest / 1e9:.2f} GB)"
            )
        running = max(1, min(point.concurrency, capacity or 1, self.batch_limit))
        context = point.isl + point.osl / 2
        step, bound = self.decode_step(running, context)
        prefill = self.prefill_time(point.isl)
        # fixed point of: λ = running / (ttft + osl·tpot), ρ = λ·prefill, tpot = step/(1-ρ)
        rho = 0.0
        for _ in range(50):
            tpot = step / max(1 - rho, 0.05)
            wait = prefill * rho / max(2 * (1 - rho), 0.1)  # M/D/1: ρ/(2(1-ρ)) prefills ahead
            ttft = prefill + wait
            rate = running / (ttft + point.osl * tpot)
            new_rho = min(rate * prefill / self.layout.attention_groups, 0.95)
            if abs(new_rho - rho) < 1e-6:
                break
            rho = 0.5 * rho + 0.5 * new_rho
        queued = point.concurrency - running
        if queued > 0:  # clients beyond the KV cache wait for a running request to finish
            ttft += queued / rate
        tput = rate * point.osl / self.layout.gpus
        return ServingPrediction(
            layout=self.layout.label(),
            gpus=self.layout.gpus,
            fits=fits,
            ttft_ms=ttft * 1e3,
            tpot_ms=tpot * 1e3,
            output_tput_per_gpu=tput if fits else 0.0,
            running=running,
            max_concurrency=capacity,
            memory=memory.as_dict(),
            bound=bound,
            why=why,
        )
