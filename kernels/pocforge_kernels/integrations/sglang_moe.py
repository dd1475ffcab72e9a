"""The kit's ``fused_experts`` inside SGLang's unquantized MoE method (SGLang 0.5.23).

SGLang's ``FusedMoE`` layer (``srt/layers/moe/fused_moe_triton/layer.py``) routes with its
``TopK`` op, dispatches through its token dispatcher, and hands the routed tokens to
``quant_method.apply(layer, dispatch_output)``; for an unquantized checkpoint that method
is ``UnquantizedFusedMoEMethod`` (``srt/layers/quantization/unquant.py``), a
``BaseFusedOp`` whose ``apply`` is ``self.forward(...)``.  So the MoE experts take the same
seam as SGLang's other layers (:mod:`.sglang_layers`): the hook replaces the class, and the
subclass adds the ``forward_plugin`` backend, which runs ``pocforge::fused_experts`` on
SGLang's ``topk_weights`` / ``topk_ids`` and returns a ``StandardCombineInput``.  SGLang
keeps routing, the dispatcher's combine, shared experts and the all-reduce.

Without the plugin, SGLang's CPU engine on a CPU without AMX resolves the method to
``forward_native`` (= ``forward_cpu``), i.e. ``moe_forward_native``; on CUDA/ROCm to
``forward_cuda`` and its ``MoeRunner``.  Any layer or call the kit does not cover goes
there, which computes the same thing from the same weights:

* per layer, once weights are loaded, with one log line naming the reason: a runner other
  than SGLang's Triton one (``triton_kernels``' transposed weights, FlashInfer's up-first
  or block layouts, DeepGEMM, Ascend), expert biases, an activation other than SiLU or a
  non-gated MLP, clamped SwiGLU (gpt-oss), router weights applied to the input, a routed
  scaling factor, ``no_combine``, expert parallelism or an all-to-all backend, EPLB, LoRA,
  weights SGLang re-laid out after loading (AMX packing, aiter shuffling with
  ``SGLANG_USE_AITER=1``, the interleaved-SwiGLU w13), or a dtype the kit does not cover;
* per call: a non-standard dispatch or top-k format, a pre-quantized input, or a hidden
  size that differs from the weights' (padding).

Quantized experts use other methods (``Fp8MoEMethod``...), which the hook leaves alone;
:func:`note_moe_method` logs that once per method class so a missing "ran" line has its
reason in the log.  Top-k ids of -1 (rows SGLang masks as padding) get weight 0 on expert
0, since the kit's kernel has no drop sentinel.  Under torch.compile SGLang swaps this
method for ``fused_moe_forward_native`` at batch size 1 (its ``_torch_compile_forward``),
so the kit runs only at larger batches there.

The class hook swaps the name ``UnquantizedFusedMoEMethod`` for this subclass in every
SGLang module, so ``isinstance(m, UnquantizedFusedMoEMethod)`` there no longer matches
other in-tree subclasses of the original (``BeamUnquantizedFusedMoEMethod``, NPU's
``NPUMXFP8OnlineMoEMethod``); the models served here (Qwen-MoE, Mixtral, DeepSeek's
unquantized experts) build the plain class.
"""

from __future__ import annotations

import torch
from sglang.srt.layers.moe import get_moe_a2a_backend
from sglang.srt.layers.moe.token_dispatcher import StandardCombineInput
from sglang.srt.layers.moe.topk import TopKOutputChecker
from sglang.srt.layers.quantization import unquant
from sglang.srt.plugins.hook_registry import HookType
from sglang.srt.runtime_context import get_exec, get_lora
from sglang.srt.utils import use_intel_amx_backend

from .proof import say
from .sglang_layers import PLUGIN, _KitBackend, _ran, _with_plugin

KIT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
_UNDECIDED = object()


class PocforgeUnquantizedFusedMoEMethod(_KitBackend, unquant.UnquantizedFusedMoEMethod):
    """SGLang's unquantized MoE method with ``pocforge::fused_experts`` as its plugin backend."""

    replaces, kit_op = "UnquantizedFusedMoEMethod", "fused_experts"
    capabilities = _with_plugin(unquant.UnquantizedFusedMoEMethod.capabilities)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._kit_reason = _UNDECIDED  # decided once weights are in their final layout
        self._kit_init()

    def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
        super().process_weights_after_loading(layer)
        self._decide(layer)

    def _decide(self, layer: torch.nn.Module) -> str | None:
        if self._kit_reason is _UNDECIDED:
            self._kit_reason = self._layer_reason(layer)
            if self._kit_reason is not None:
                say(
                    f"fused_moe: SGLang's MoE runs a layer with {self._kit_reason}",
                    once=f"fallback:moe:{self._kit_reason}",
                )
        return self._kit_reason

    def _layer_reason(self, layer: torch.nn.Module) -> str | None:
        """Why the kit cannot take this layer (None: it can); weights must be processed."""
        cfg = layer.moe_runner_config
        runner = self.get_moe_runner_backend(layer)  # a MoeRunnerBackend (None: no runner)
        w13, w2 = layer.w13_weight, layer.w2_weight
        reasons = {
            f"the {getattr(runner, 'value', runner)} MoE runner": runner is None
            or not runner.is_triton(),
            "triton_kernels' transposed weights": self.use_triton_kernels,
            "FlashInfer's weight layout": self.use_flashinfer_cutlass
            or self.use_flashinfer_trtllm_moe,
            "DeepGEMM": self.use_deep_gemm,
            "expert biases": self.with_bias,
            "a non-gated MLP": not cfg.is_gated,
            f"activation {cfg.activation}": cfg.activation != "silu",
            "clamped SwiGLU": any(
                v is not None for v in (cfg.gemm1_alpha, cfg.gemm1_clamp_limit, cfg.swiglu_limit)
            ),
            "router weights applied to the input": cfg.apply_router_weight_on_input,
            "a routed scaling factor": cfg.routed_scaling_factor not in (None, 1.0),
            "no_combine": cfg.no_combine,
            "expert parallelism": getattr(layer, "moe_ep_size", 1) > 1,
            f"the {get_moe_a2a_backend().value} all-to-all backend": not (
                get_moe_a2a_backend().is_none()
            ),
            "EPLB": get_exec().moe.enable_eplb,
            "LoRA": bool(get_lora().enable_lora or get_lora().lora_paths),
            "AMX-packed weights": use_intel_amx_backend(layer),
            "aiter (SGLANG_USE_AITER=1)": unquant._use_aiter,
            "interleaved gate/up rows": self.w13_swiglu_interleaved,
            f"{w13.dtype} weights": w13.dtype not in KIT_DTYPES or w2.dtype != w13.dtype,
            "weights not in [E, 2I, H] / [E, H, I]": w13.dim() != 3
            or tuple(w2.shape) != (w13.shape[0], w13.shape[2], w13.shape[1] // 2),
        }
        return next((reason for reason, hit in reasons.items() if hit), None)

    def backend_eligible(self, backend_, *args, **kwargs) -> bool:
        if backend_ is not PLUGIN:
            return super().backend_eligible(backend_, *args, **kwargs)
        return self._kit_skips(*args, **kwargs) is None

    def _kit_skips(self, layer, dispatch_output) -> str | None:
        if self._decide(layer) is not None:
            return self._kit_reason  # logged once by _decide
        topk = dispatch_output.topk_output
        x = dispatch_output.hidden_states
        reasons = {
            "a non-standard dispatch format": not dispatch_output.format.is_standard(),
            "a non-standard top-k format": not TopKOutputChecker.format_is_standard(topk),
            "a pre-quantized input": dispatch_output.hidden_states_scale is not None
            or getattr(dispatch_output, "hidden_states_pre_quant", None) is not None,
            "a padded hidden size": x.dim() != 2 or x.shape[-1] != layer.w13_weight.shape[2],
            f"{x.dtype} input": x.dtype != layer.w13_weight.dtype,
        }
        reason = next((reason for reason, hit in reasons.items() if hit), None)
        if reason is not None:
            say(
                f"{self.replaces}: a call with {reason} runs SGLang's own path",
                once=f"fallback:{type(self).__qualname__}:{reason}",
            )
        return reason

    def forward_plugin(self, layer, dispatch_output) -> StandardCombineInput:
        x = dispatch_output.hidden_states
        topk = dispatch_output.topk_output
        weights, ids = topk.topk_weights, topk.topk_ids
        dropped = ids < 0  # SGLang's drop sentinel (masked padding rows): weight 0
        ids = ids.masked_fill(dropped, 0)
        weights = weights.masked_fill(dropped, 0)
        out = self._kit(x, layer.w13_weight, layer.w2_weight, weights, ids)
        _ran("fused_moe", x)
        return StandardCombineInput(hidden_states=out)


def note_moe_method(result, layer, *args, **kwargs) -> None:
    """``FusedMoE.__init__`` AFTER hook: log a layer whose experts the kit cannot reach."""
    method = getattr(layer, "quant_method", None)
    if method is not None and not isinstance(method, PocforgeUnquantizedFusedMoEMethod):
        name = type(method).__name__
        say(
            f"fused_moe: {name} (not the unquantized method) runs SGLang's own kernel",
            once=f"fallback:moe-method:{name}",
        )


# The hooks :mod:`.sglang_hook` registers for the kit op ``fused_moe``: (target, hook, type).
MOE_HOOKS = [
    (
        "sglang.srt.layers.quantization.unquant.UnquantizedFusedMoEMethod",
        PocforgeUnquantizedFusedMoEMethod,
        HookType.REPLACE,
    ),
    (
        "sglang.srt.layers.moe.fused_moe_triton.layer.FusedMoE.__init__",
        note_moe_method,
        HookType.AFTER,
    ),
]
