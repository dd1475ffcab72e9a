"""pocforge_kernels: the shared Triton kernel library. Stand-alone: never imports pocforge's other packages."""

# Each op lives in its own folder: ref.py (the plain-torch spec), kernel.py (the
# @triton.jit bodies), op.py (launcher and torch.library custom op), configs/<arch>.json
# (launch configs), bench.py (its benchmark cases and extra compile variants).  Importing
# this package is cheap: torch and triton load only when an op is first used, through
# load() or an import of the op's folder:
#
#     from pocforge_kernels.rms_norm import rms_norm
#     rms_norm = pocforge_kernels.load("rms_norm")
#
# POCFORGE_KERNELS=reference sends every op to its reference (see backend.py).

from __future__ import annotations

from importlib import import_module

# Public entry point -> "folder:function".  The folder is the op's package.
OPS: dict[str, str] = {
    "rms_norm": "rms_norm:rms_norm",
    "rotary_embedding": "rotary_embedding:rotary_embedding",
    "silu_and_mul": "act_and_mul:silu_and_mul",
    "gelu_and_mul": "act_and_mul:gelu_and_mul",
    "per_token_quant_fp8": "fp8_quant:per_token_quant_fp8",
    "per_block_quant_fp8": "fp8_quant:per_block_quant_fp8",
    "fp8_gemm": "fp8_gemm:fp8_gemm",
    "flash_attention_prefill": "flash_attention_prefill:flash_attention_prefill",
    "paged_attention_decode": "paged_attention_decode:paged_attention_decode",
    "topk_softmax": "fused_moe:topk_softmax",
    "fused_experts": "fused_moe:fused_experts",
    "fused_moe": "fused_moe:fused_moe",
    "mla_decode": "mla_decode:mla_decode",
}


def op_folders() -> list[str]:
    """The op packages, in :data:`OPS` order ("rms_norm", "act_and_mul", "fp8_quant", ...)."""
    return list(dict.fromkeys(target.split(":")[0] for target in OPS.values()))


def load(name: str):
    """The public function of op ``name`` (registers its ``torch.ops.pocforge`` ops on import)."""
    try:
        folder, function = OPS[name].split(":")
    except KeyError:
        raise KeyError(f"unknown op {name!r}; known: {', '.join(sorted(OPS))}") from None
    found = getattr(import_module(f"{__name__}.{folder}"), function)
    from .fault import wrap

    return wrap(name, found)


def load_all() -> None:
    """Import every op so all ``torch.ops.pocforge.*`` custom ops are registered."""
    for name in OPS:
        load(name)
