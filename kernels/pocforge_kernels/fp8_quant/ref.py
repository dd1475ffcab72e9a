"""Dynamic fp8 quantization in plain torch: the spec of the Triton kernels.

For every group ``G`` of elements (a token's row, a 1 x g slice of it, or a
128 x 128 block of a weight)::

    scale_G = max(amax(|x_G|), EPS) / FP8_MAX            (fp32)
    q       = round_to_fp8(clamp(x / scale_G, -FP8_MAX, FP8_MAX))
    x      ~= q * scale_G                                 (dequantised)

``FP8_MAX`` is 448 for OCP ``float8_e4m3fn`` (NVIDIA, MI355X) and 240 for
``float8_e4m3fnuz`` (MI300X/MI325X: no negative zero, exponent bias 8).  The
1 x 128 activation groups and 128 x 128 weight blocks are DeepSeek-V3's scheme
(DeepSeek-V3 technical report, section 3.3.2; ``act_quant`` / ``weight_quant`` in
its inference code); per-token scales are vLLM's ``scaled_fp8_quant``
``use_per_token_if_dynamic``.  The rounding is round-to-nearest-even, torch's
cast.  ``EPS`` keeps an all-zero group from dividing by zero.
"""

from __future__ import annotations

import torch

FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e4m3fnuz)
EPS = 1e-10  # DeepSeek-V3's clamp on amax


def fp8_max(fp8_dtype: torch.dtype) -> float:
    """448.0 for e4m3fn, 240.0 for e4m3fnuz."""
    if fp8_dtype not in FP8_DTYPES:
        raise ValueError(f"fp8 dtype must be one of {FP8_DTYPES}, not {fp8_dtype}")
    return float(torch.finfo(fp8_dtype).max)


def _quantize_groups(xg: torch.Tensor, fp8_dtype: torch.dtype, dims) -> tuple[torch.Tensor, ...]:
    """Quantise ``xg`` whose groups span ``dims``; returns (q, scale with those dims kept)."""
    fmax = fp8_max(fp8_dtype)
    ct = torch.promote_types(xg.dtype, torch.float32)
    xf = xg.to(ct)
    scale = xf.abs().amax(dim=dims, keepdim=True).clamp_min(EPS) / fmax
    q = (xf / scale).clamp(-fmax, fmax).to(fp8_dtype)
    return q, scale


def per_token_quant_fp8(
    x: torch.Tensor, fp8_dtype: torch.dtype, group_size: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``x [M, K]`` -> ``q [M, K]`` (fp8), ``scale [M, K // g]`` (fp32; ``[M, 1]`` per token).

    ``group_size`` g must divide K; None means one group per row.
    """
    m, k = x.shape
    g = group_size or k
    if k % g:
        raise ValueError(f"group_size {g} must divide K={k}")
    q, scale = _quantize_groups(x.reshape(m, k // g, g), fp8_dtype, dims=(-1,))
    return q.reshape(m, k), scale.reshape(m, k // g).to(torch.float32)


def per_block_quant_fp8(
    x: torch.Tensor, fp8_dtype: torch.dtype, block_size: int = 128
) -> tuple[torch.Tensor, torch.Tensor]:
    """``x [N, K]`` -> ``q [N, K]`` (fp8), ``scale [ceil(N/b), ceil(K/b)]`` (fp32).

    Ragged edge blocks are quantised over the elements they hold (zero padding
    does not change an amax).
    """
    n, k = x.shape
    b = block_size
    nb, kb = -(-n // b), -(-k // b)
    padded = torch.zeros(nb * b, kb * b, dtype=x.dtype, device=x.device)
    padded[:n, :k] = x
    q, scale = _quantize_groups(padded.view(nb, b, kb, b), fp8_dtype, dims=(1, 3))
    return q.reshape(nb * b, kb * b)[:n, :k].contiguous(), scale.reshape(nb, kb).to(torch.float32)


def group_shape(
    scale: torch.Tensor, rows: int, cols: int, block_size: int = 128
) -> tuple[int, int]:
    """How many ``(rows, cols)`` of a ``[rows, cols]`` tensor share one entry of ``scale``.

    Recognises the three layouts above: ``[rows, 1]``, ``[rows, cols // g]`` and
    ``[ceil(rows/b), ceil(cols/b)]``.
    """
    if scale.shape[0] == rows:
        return 1, cols // scale.shape[1]
    return block_size, block_size


def dequantize(q: torch.Tensor, scale: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    """``q * scale`` with ``scale`` broadcast over its groups (any layout above)."""
    n, k = q.shape
    rows, cols = group_shape(scale, n, k)
    full = scale.to(dtype).repeat_interleave(rows, 0)[:n].repeat_interleave(cols, 1)[:, :k]
    return q.to(dtype) * full
