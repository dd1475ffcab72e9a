"""Which kit op runs inside which serving framework, and what makes the framework keep its own.

The one table of that knowledge: the vLLM plugin registers exactly the ops listed for
``vllm`` (:mod:`.vllm_plugin`), the SGLang hook exactly those for ``sglang``
(:mod:`.sglang_hook`), and ``pocforge validate`` refuses a spec whose ``serving.kernels``
names one that will not run with its framework, dtype, quantization and parallel layout
(the kit's ``spec/rules.py`` calls :func:`serving_problem`). Plain data: no torch, no
framework import.

What each layer declines, and why (the layer modules check the same at run time, per
layer, and log it; this table is what can be told from a spec):

- ``fused_moe`` replaces the *unquantized* MoE method (vLLM's and SGLang's
  ``UnquantizedFusedMoEMethod``): a quantized checkpoint builds ``Fp8MoEMethod`` & co.,
  which the kit leaves alone; expert parallelism (its all-to-all dispatch) is declined by
  both (:mod:`.vllm_layers`, :mod:`.sglang_moe`);
- the norm, activation and rotary layers are unquantized in a quantized model too (an FP8
  linear quantizes its own input), so quantization does not stop them;
- every layer takes float32, bfloat16 and float16 (the kit kernels' dtypes);
- ops with no layer in a framework (``mla_decode``, ``fp8_gemm``, ``fp8_quant``,
  ``flash_attention_prefill``, ``paged_attention_decode``) run only in the kit's kernel
  benchmark (``kernels.ops``), never inside a server.

Not told from a spec: a model that builds a *subclass* of a layer (Llama-3.1's
``Llama3RotaryEmbedding``, YaRN or DeepSeek's rotary, ``GemmaRMSNorm``) keeps the
framework's code, since both hooks replace the exact class; the server log says so.
"""

from __future__ import annotations

from dataclasses import dataclass

KIT_DTYPES = ("float32", "bfloat16", "float16")


@dataclass(frozen=True)
class Layer:
    """One kit op inside one framework: the class it stands in for and what it declines."""

    framework: str  # "vllm" | "sglang"
    op: str  # the kit op name of serving.kernels
    replaces: str  # module.Class of the framework's layer the kit's subclass replaces
    custom_op: str | None = None  # vLLM: the CustomOp name compilation_config enables
    quantized: bool = True  # False: declines a quantized checkpoint
    expert_parallel: bool = True  # False: declines expert parallelism (ep > 1)
    dtypes: tuple[str, ...] = KIT_DTYPES


_VLLM = "vllm.model_executor.layers"
_SGLANG = "sglang.srt.layers"
LAYERS: tuple[Layer, ...] = (
    Layer("vllm", "rms_norm", f"{_VLLM}.layernorm.RMSNorm", "rms_norm"),
    Layer("vllm", "silu_and_mul", f"{_VLLM}.activation.SiluAndMul", "silu_and_mul"),
    Layer("vllm", "gelu_and_mul", f"{_VLLM}.activation.GeluAndMul", "gelu_and_mul"),
    Layer(
        "vllm",
        "rotary_embedding",
        f"{_VLLM}.rotary_embedding.base.RotaryEmbedding",
        "rotary_embedding",
    ),
    Layer(
        "vllm",
        "fused_moe",
        f"{_VLLM}.fused_moe.unquantized_fused_moe_method.UnquantizedFusedMoEMethod",
        "unquantized_fused_moe",
        quantized=False,
        expert_parallel=False,
    ),
    Layer("sglang", "rms_norm", f"{_SGLANG}.layernorm.RMSNorm"),
    Layer("sglang", "silu_and_mul", f"{_SGLANG}.activation.SiluAndMul"),
    Layer("sglang", "gelu_and_mul", f"{_SGLANG}.activation.GeluAndMul"),
    Layer("sglang", "rotary_embedding", f"{_SGLANG}.rotary_embedding.base.RotaryEmbedding"),
    Layer(
        "sglang",
        "fused_moe",
        f"{_SGLANG}.quantization.unquant.UnquantizedFusedMoEMethod",
        quantized=False,
        expert_parallel=False,
    ),
)


def layers(framework: str) -> dict[str, Layer]:
    """Kit op -> its layer in ``framework`` (ops without one are absent)."""
    return {layer.op: layer for layer in LAYERS if layer.framework == framework}


def serving_problem(
    framework: str, op: str, *, dtype: str, quantization: str, expert_parallel: bool
) -> str | None:
    """Why kit op ``op`` will not run inside ``framework`` for this deployment (None: it
    will). ``dtype`` and ``quantization`` are the spec's names (``auto``, ``none``...)."""
    layer = layers(framework).get(op)
    if layer is None:
        where = ", ".join(layers(framework)) or "none"
        return f"{framework} has no layer the kit's {op} plugs into (kit ops it serves: {where})"
    reasons = []
    if quantization != "none" and not layer.quantized:
        reasons.append(f"a {quantization} checkpoint runs {framework}'s quantized MoE method")
    if expert_parallel and not layer.expert_parallel:
        reasons.append("it declines expert parallelism (ep > 1)")
    if dtype != "auto" and dtype not in layer.dtypes:
        reasons.append(f"it takes {', '.join(layer.dtypes)}, not {dtype}")
    if not reasons:
        return None
    return f"the kit's {op} replaces {framework}'s {layer.replaces.rsplit('.', 1)[1]}: " + (
        "; ".join(reasons)
    )
