"""A parallel layout and the numeric formats it runs in: the planner's inputs besides the
model and the GPU."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

Precision = Literal["fp32", "bf16", "fp8", "fp4"]
Framework = Literal["vllm", "sglang", "trtllm", "deepspeed", "megatron"]

# Bytes per weight by part, for each deployment precision. fp8: every linear layer in fp8
# (per-tensor or per-block scales, negligible); fp4: the MLP and expert matrices in 4 bits
# plus one 8-bit scale per 16 values (NVFP4) or per 32 (MXFP4: the larger of the two is
# kept), attention in fp8, as DeepSeek-R1-FP4 and gpt-oss ship; embedding and LM head stay
# in bf16 in all of them. fp32: the kit's CPU demo.
WEIGHT_BYTES: dict[str, dict[str, float]] = {
    "fp32": {"attention": 4, "mlp": 4, "embedding": 4},
    "bf16": {"attention": 2, "mlp": 2, "embedding": 2},
    "fp8": {"attention": 1, "mlp": 1, "embedding": 2},
    "fp4": {"attention": 1, "mlp": 0.5 + 1 / 16, "embedding": 2},
}
KV_BYTES = {"fp32": 4, "bf16": 2, "fp8": 1}


@dataclass(frozen=True)
class Layout:
    """How one replica of the model is spread over GPUs.

    ``dp_attention`` (SGLang): the ``dp`` attention groups live inside the ``tp`` GPUs
    (attention is sharded over ``tp / dp``), so a replica has ``tp × pp`` GPUs; otherwise
    ``dp`` copies of the ``tp × pp`` model make ``tp × pp × dp``. ``ep``: the GPUs the routed
    experts are spread over (1: the experts are sharded like the dense layers, over tp).
    Training adds ``cp`` (context parallel), ``vpp`` (virtual pipeline stages), ``zero`` (DeepSpeed ZeRO stage, or Megatron's
    distributed optimizer as 1) and the micro-batch."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    dp_attention: bool = False
    cp: int = 1
    zero: int = 0
    micro_batch: int = 1
    vpp: int = 1  # virtual pipeline stages per GPU (Megatron's interleaved 1F1B)
    recompute: Literal["none", "selective", "full"] = "none"
    offload: Literal["none", "optimizer", "parameters", "both"] = "none"

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.cp * (1 if self.dp_attention else self.dp)

    @property
    def attention_tp(self) -> int:
        """GPUs one attention group shards its heads over."""
        return max(1, self.tp // self.dp) if self.dp_attention else self.tp

    @property
    def attention_groups(self) -> int:
        """Groups that each hold their own requests' KV cache (DP ranks)."""
        return self.dp

    def label(self) -> str:
        parts = [f"TP{self.tp}"]
        for name in ("pp", "dp", "ep", "cp"):
            if getattr(self, name) > 1:
                parts.append(f"{name.upper()}{getattr(self, name)}")
        if self.dp_attention:
            parts.append("DPA")
        if self.zero:
            parts.append(f"Z{self.zero}")
        if self.vpp > 1:
            parts.append(f"VPP{self.vpp}")
        if self.micro_batch > 1:
            parts.append(f"MB{self.micro_batch}")
        if self.recompute != "none":
            parts.append(f"RC-{self.recompute}")
        return "·".join(parts)

    def with_(self, **changes) -> Layout:
        return replace(self, **changes)


def layout_problems(framework: str, layout: Layout, experts: int | None) -> list[tuple[str, str]]:
    """Why ``framework`` would refuse ``layout`` (one serving replica, or one P/D instance)
    for a model with ``experts`` routed experts, as (the parallelism field to change, why);
    [] when it runs it. Shared by ``validate``
    (the spec's rules) and the planner, so the planner never ranks a refused layout.

    - vLLM: expert parallelism spans all tp×dp GPUs (``--enable-expert-parallel``): ep is
      1 or tp×dp; it has no DP attention.
    - SGLang (``runtime_context.derive_parallel_widths`` in 0.5.23: ``moe_tp_size = tp //
      ep``, ``attn_tp_size = tp // attn_dp_size``) and TensorRT-LLM (``moe_tp × moe_ep =
      tp``): the experts are split inside the tp group, so ep divides tp; DP attention's
      groups split tp too, so it needs dp > 1 dividing tp.
    - every framework: ep divides the experts."""
    out = []
    span = layout.tp if layout.dp_attention else layout.tp * layout.dp
    if layout.dp_attention:
        if framework == "vllm":
            out.append(("dp_attention", "dp_attention is SGLang's; with vLLM use dp with ep"))
        elif layout.dp < 2:
            out.append((
                "dp",
                f"dp_attention splits tp into dp attention groups, and dp is {layout.dp}: set "
                f"dp to a divisor of tp ({layout.tp}) above 1, or remove dp_attention",
            ))  # fmt: skip
        elif layout.tp % layout.dp:
            out.append(("dp", f"with dp_attention, dp ({layout.dp}) must divide tp ({layout.tp})"))
    if layout.ep > 1:
        if framework == "vllm" and layout.ep != span:
            out.append((
                "ep",
                f"vLLM's expert parallelism spans all tp×dp = {span} GPUs; set ep to {span} "
                "(or 1 for none)",
            ))  # fmt: skip
        elif framework != "vllm" and layout.tp % layout.ep:
            out.append((
                "ep",
                f"{framework} splits the experts inside the tp group: ep ({layout.ep}) must "
                f"divide tp ({layout.tp})",
            ))  # fmt: skip
        if experts and experts % layout.ep:
            out.append(("ep", f"{experts} experts do not split evenly over ep = {layout.ep}"))
    return out
