"""fp8 quantization's benchmark cases, both memory bound (see :mod:`..bench.case`).

One spec op, ``fp8_quant``, two cases: per-token quantization of activations
(``T x H``, one scale per row), at every model; and 128 x 128 per-block
quantization of a weight (``N x K``, the MoE gate/up projection), at the models
that ship block-scaled fp8 weights (``fp8_block_scales``: DeepSeek-V3).
"""

from __future__ import annotations

from .. import load
from ..bench.case import Case, randn, size, vllm_ops
from . import default_fp8_dtype, ref


def per_token(m, w, device, dtype):
    t, h = w["decode_batch"], m["hidden_size"]
    x = randn(t, h, device=device, dtype=dtype)
    fp8 = default_fp8_dtype(device)
    ops = vllm_ops()
    return Case(
        "fp8_quant",
        f"per-token T={t} H={h} {fp8}".replace("torch.", ""),
        {"T": t, "H": h},
        lambda: load("per_token_quant_fp8")(x, fp8),
        lambda: ref.per_token_quant_fp8(x, fp8),
        size(x) * 3 // 2 + 4 * t,  # read x, write 1-byte q and one fp32 scale per row
        3 * t * h,  # abs-max, scale, cast
        tolerance_dtype=fp8,
        peers={"vLLM": lambda: ops.scaled_fp8_quant(x, use_per_token_if_dynamic=True)}
        if ops
        else {},
    )


def per_block(m, w, device, dtype):
    if not m.get("fp8_block_scales"):
        return None
    n, k = m["moe_intermediate_size"] * 2, m["hidden_size"]
    x = randn(n, k, device=device, dtype=dtype)
    fp8 = default_fp8_dtype(device)
    return Case(
        "fp8_quant",
        f"per-block N={n} K={k} {fp8}".replace("torch.", ""),
        {"N": n, "K": k},
        lambda: load("per_block_quant_fp8")(x, fp8),
        lambda: ref.per_block_quant_fp8(x, fp8),
        size(x) * 3 // 2,
        3 * n * k,
        tolerance_dtype=fp8,
    )


CASES = {"fp8_quant": (per_token, per_block)}
