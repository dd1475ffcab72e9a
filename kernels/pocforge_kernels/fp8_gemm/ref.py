"""Scaled fp8 GEMM in plain torch: the spec of the Triton kernel.

``out = dequant(A) @ dequant(B).T`` where ``A [M, K]`` and ``B [N, K]`` hold
e4m3 values and their fp32 scales come from :mod:`pocforge_kernels.fp8_quant`::

    a_scale [M, 1]                 per token         (vLLM's dynamic per-token fp8)
    a_scale [M, K / 128]           per 1 x 128 group  (DeepSeek-V3 activations)
    b_scale [N, 1]                 per output channel
    b_scale [N / 128, K / 128]     per 128 x 128 block (DeepSeek-V3 weights)

Any A layout pairs with any B layout.  Products accumulate in at least fp32 and
the result is cast to ``out_dtype``.
"""

from __future__ import annotations

import torch

from ..fp8_quant.ref import dequantize


def fp8_gemm(
    a: torch.Tensor,
    a_scale: torch.Tensor,
    b: torch.Tensor,
    b_scale: torch.Tensor,
    out_dtype: torch.dtype,
) -> torch.Tensor:
    """``[M, K] x [N, K] -> [M, N]`` in ``out_dtype``.  fp8 operands may be passed upcast.

    The arithmetic dtype is that of the operands when they are float64 (tests),
    fp32 otherwise.
    """
    ct = torch.float64 if a.dtype == torch.float64 else torch.float32
    return (dequantize(a, a_scale, ct) @ dequantize(b, b_scale, ct).T).to(out_dtype)
