"""The kit's kernels inside vLLM's layer classes (vLLM 0.32), registered by :mod:`.vllm_plugin`.

Each class subclasses a vLLM ``CustomOp`` layer and keeps its constructor, weights and
``forward_native``; it overrides every platform forward vLLM's ``dispatch_forward`` can
pick (``forward_cuda``, ``_hip``, ``_cpu``, ``_xpu``, ``_tpu``, ``_oot``) with the kit
kernel, with vLLM's signature and return convention:

==============================  ======================================  =====================
vLLM layer (custom op name)     forward                                  kit op
==============================  ======================================  =====================
``RMSNorm`` (rms_norm)          ``(x, residual=None)`` -> ``y`` or       ``rms_norm`` /
                                ``(y, x + residual)``                    ``fused_add_rms_norm``
``SiluAndMul`` (silu_and_mul)   ``(x [..., 2d])`` -> ``[..., d]``        ``silu_and_mul``
``GeluAndMul`` (gelu_and_mul)   same, ``self.approximate``               ``gelu_and_mul``
``RotaryEmbedding``             ``(positions, query, key=None)`` ->      ``rotary_embedding``
(rotary_embedding)              ``(query, key)`` rotated in place,       (in place)
                                as vLLM's ``forward_cuda`` / ``_cpu``
``UnquantizedFusedMoEMethod``   ``(layer, x, topk_weights, topk_ids,     ``fused_experts``
(unquantized_fused_moe)         shared_experts, shared_experts_input)``
==============================  ======================================  =====================

Not replaced, and why: subclasses of these layers (``Llama3RotaryEmbedding``, YaRN,
mRoPE, ``GemmaRMSNorm``...) keep vLLM's code, because ``CustomOp.__new__`` looks the
registry up by the exact class name; ``RMSNorm`` with ``var_hidden_size`` runs
``forward_native``.  MoE: the kit computes the experts of tokens vLLM's router has
already routed (vLLM keeps routing, shared experts and the all-reduce); it takes over
only an unquantized, bias-free, SiLU-gated layer without expert parallelism, all2all
kernels, EPLB, LoRA, clamped SwiGLU, padded sizes or router weights applied to the
input, and keeps the weights in the checkpoint layout (``w13 [E, 2I, H]``,
``w2 [E, H, I]``) instead of letting vLLM's kernel repack them.  Any other layer runs
vLLM's own kernel; the server log says why.

Logging the first run of each kernel is skipped while torch.compile traces (a Python
side effect would break the graph), so with compilation on the "ran" lines appear
only for code that runs eagerly; the "->" construction lines always appear.
"""

from __future__ import annotations

import torch
from vllm.model_executor.layers.activation import GeluAndMul, SiluAndMul
from vllm.model_executor.layers.fused_moe.activation import MoEActivation
from vllm.model_executor.layers.fused_moe.unquantized_fused_moe_method import (
    UnquantizedFusedMoEMethod,
)
from vllm.model_executor.layers.layernorm import RMSNorm
from vllm.model_executor.layers.rotary_embedding.base import RotaryEmbedding
from vllm.model_executor.utils import is_weights_pre_processed

from .. import load
from ..backend import backend
from .proof import say


def _built(layer, replaces: str) -> bool:
    """Log the first construction of ``layer``'s class; True when its custom op is enabled."""
    cls = type(layer)
    enabled = layer._enforce_enable or cls.enabled()
    state = (
        "enabled"
        if enabled
        else f"disabled: add +{cls.name} to compilation_config.custom_ops; vLLM's native runs"
    )
    say(
        f"{replaces} -> {cls.__module__}.{cls.__qualname__} (custom op {cls.name} {state})",
        once=f"built:{cls.__qualname__}",
    )
    return enabled


def _ran(op: str, x: torch.Tensor) -> None:
    if not torch.compiler.is_compiling():
        say(f"{op} ran ({backend()}) on {tuple(x.shape)} {x.dtype}", once=f"ran:{op}")


class PocforgeRMSNorm(RMSNorm):
    """vLLM's ``RMSNorm`` running ``pocforge::rms_norm`` / ``pocforge::fused_add_rms_norm``."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._kit = load("rms_norm")
        _built(self, "RMSNorm")

    def forward_kit(
        self, x: torch.Tensor, residual: torch.Tensor | None = None
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        if self.variance_size_override is not None:  # the kit normalises over the full row
            say("RMSNorm with var_hidden_size runs vLLM's native", once="fallback:rms_norm")
            return self.forward_native(x, residual)
        # weight is all ones (a plain tensor) when has_weight=False, as vLLM's native sees it.
        out = self._kit(x, self.weight.data, self.variance_epsilon, residual)
        _ran("rms_norm" if residual is None else "fused_add_rms_norm", x)
        return out

    forward_cuda = forward_hip = forward_cpu = forward_xpu = forward_tpu = forward_oot = forward_kit


class PocforgeSiluAndMul(SiluAndMul):
    """vLLM's ``SiluAndMul`` running ``pocforge::silu_and_mul``."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._kit = load("silu_and_mul")
        _built(self, "SiluAndMul")

    def forward_kit(self, x: torch.Tensor) -> torch.Tensor:
        out = self._kit(x)
        _ran("silu_and_mul", x)
        return out

    forward_cuda = forward_hip = forward_cpu = forward_xpu = forward_tpu = forward_oot = forward_kit


class PocforgeGeluAndMul(GeluAndMul):
    """vLLM's ``GeluAndMul`` running ``pocforge::gelu_and_mul`` (erf or tanh, as configured)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._kit = load("gelu_and_mul")
        _built(self, "GeluAndMul")

    def forward_kit(self, x: torch.Tensor) -> torch.Tensor:
        out = self._kit(x, self.approximate)
        _ran("gelu_and_mul", x)
        return out

    forward_cuda = forward_hip = forward_cpu = forward_xpu = forward_tpu = forward_oot = forward_kit


class PocforgeRotaryEmbedding(RotaryEmbedding):
    """vLLM's plain ``RotaryEmbedding`` running ``pocforge::rotary_embedding`` in place."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._kit = load("rotary_embedding")
        _built(self, "RotaryEmbedding")

    def forward_kit(
        self,
        positions: torch.Tensor,
        query: torch.Tensor,
        key: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        cos_sin_cache = self._match_cos_sin_cache_dtype(query)
        self._kit(positions, query, key, self.head_size, cos_sin_cache, self.is_neox_style)
        _ran("rotary_embedding", query)
        return query, key

    forward_cuda = forward_hip = forward_cpu = forward_xpu = forward_tpu = forward_oot = forward_kit


class PocforgeUnquantizedFusedMoEMethod(UnquantizedFusedMoEMethod):
    """vLLM's unquantized MoE method with the kit's ``fused_experts`` for routed tokens."""

    def __init__(self, moe) -> None:
        super().__init__(moe)
        self._kit = load("fused_experts")
        self._enabled = _built(self, "UnquantizedFusedMoEMethod")
        self._kit_on = self._enabled and self._config_reason() is None

    def _config_reason(self) -> str | None:
        """Why the kit cannot take this layer by its config alone (None: it can)."""
        moe, par = self.moe, self.moe.moe_parallel_config
        reasons = {
            "not a gated (act-and-mul) MoE": not moe.is_act_and_mul,
            f"activation {moe.activation.value}": moe.activation != MoEActivation.SILU,
            "expert biases": moe.has_bias,
            "expert parallelism": par.use_ep,
            "all2all kernels": par.use_all2all_kernels,
            "EPLB": par.enable_eplb,
            "LoRA": moe.is_lora_enabled,
            "clamped SwiGLU": any(
                v is not None for v in (moe.swiglu_limit, moe.swiglu_alpha, moe.swiglu_beta)
            ),
            "padded sizes": moe.hidden_dim != moe.hidden_dim_unpadded
            or moe.intermediate_size_per_partition != moe.intermediate_size_per_partition_unpadded,
        }
        return next((reason for reason, hit in reasons.items() if hit), None)

    def _layer_reason(self, layer) -> str | None:
        reasons = {
            "an expert map": layer.expert_map is not None,
            "router weights applied to the input": layer.apply_router_weight_on_input,
            "pre-processed weights": is_weights_pre_processed(),
        }
        return next((reason for reason, hit in reasons.items() if hit), None)

    def process_weights_after_loading(self, layer) -> None:
        reason = self._config_reason() or self._layer_reason(layer)
        if self._kit_on and reason is None:
            # Keep the checkpoint layout the kit reads; vLLM's kernel would repack it (on
            # CPU into its grouped-GEMM layout).  No vLLM MoE kernel is built, so the runner
            # routes, runs shared experts and reduces itself (supports_internal_mk False).
            self.moe_quant_config = self.get_fused_moe_quant_config(layer)
            return
        if self._enabled:
            say(f"fused_moe: vLLM's MoE kernel runs this layer ({reason})", once="fallback:moe")
        self._kit_on = False
        super().process_weights_after_loading(layer)

    @property
    def is_monolithic(self) -> bool:
        # Read during construction too, before __init__ has set _kit_on.
        return False if getattr(self, "_kit_on", False) else super().is_monolithic

    def forward_kit(
        self,
        layer,
        x: torch.Tensor,
        topk_weights: torch.Tensor,
        topk_ids: torch.Tensor,
        shared_experts,
        shared_experts_input: torch.Tensor | None,
    ) -> torch.Tensor:
        if not self._kit_on:
            return self.forward_native(
                layer, x, topk_weights, topk_ids, shared_experts, shared_experts_input
            )
        # Shared experts: without an internal MoE kernel the runner runs them (NO_OVERLAP).
        out = self._kit(x, layer.w13_weight, layer.w2_weight, topk_weights, topk_ids)
        _ran("fused_moe", x)
        return out

    forward_cuda = forward_hip = forward_cpu = forward_xpu = forward_tpu = forward_oot = forward_kit


# Kit op -> the class :mod:`.vllm_plugin` registers in place of the in-tree layer.
LAYER_CLASSES: dict[str, type] = {
    "rms_norm": PocforgeRMSNorm,
    "silu_and_mul": PocforgeSiluAndMul,
    "gelu_and_mul": PocforgeGeluAndMul,
    "rotary_embedding": PocforgeRotaryEmbedding,
    "fused_moe": PocforgeUnquantizedFusedMoEMethod,
}
