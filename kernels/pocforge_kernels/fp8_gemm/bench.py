"""The fp8 GEMM's benchmark case (see :mod:`..bench.case`): block-scaled where the model ships
128 x 128 block-scaled weights (DeepSeek-V3), per-token / per-channel elsewhere."""

from __future__ import annotations

import torch

from .. import load
from ..bench.case import Case, randn, size
from ..fp8_quant import default_fp8_dtype
from ..fp8_quant import ref as quant
from . import ref


def fp8_gemm(m, w, device, dtype):
    block = m.get("fp8_block_scales", False)
    t, k = w["decode_batch"], m["hidden_size"]
    n = 2 * m.get("moe_intermediate_size" if block else "intermediate_size")
    fp8 = default_fp8_dtype(device)
    a, a_s = quant.per_token_quant_fp8(randn(t, k, device=device), fp8, 128 if block else None)
    wq = randn(n, k, device=device)
    b, b_s = quant.per_block_quant_fp8(wq, fp8) if block else quant.per_token_quant_fp8(wq, fp8)
    scales = "1x128 / 128x128 block" if block else "per-token / per-channel"

    def scaled_mm():  # cuBLASLt / hipBLASLt with row-wise scales (no block scales there)
        return torch._scaled_mm(a, b.t(), scale_a=a_s, scale_b=b_s.t(), out_dtype=dtype)

    return Case(
        "fp8_gemm",
        f"M={t} N={n} K={k} {scales}",
        {"M": t, "N": n, "K": k},
        lambda: load("fp8_gemm")(a, a_s, b, b_s, dtype),
        lambda: ref.fp8_gemm(a, a_s, b, b_s, dtype),
        size(a, b, a_s, b_s) + t * n * torch.finfo(dtype).bits // 8,
        2 * t * n * k,
        precision="fp8",
        tolerance_dtype=dtype,
        peers={} if block else {"torch _scaled_mm": scaled_mm},
    )


CASES = {"fp8_gemm": (fp8_gemm,)}
