"""Scaled fp8 GEMM entry point: ``pocforge::fp8_gemm``.

``a [M, K]``, ``b [N, K]`` (fp8 e4m3, either flavour), scales as produced by
:mod:`pocforge_kernels.fp8_quant` (layouts in :mod:`.ref`), ``out [M, N]`` in
``out_dtype``.  Launch configs: ``configs/<arch>.json`` keyed by M (the token
count, which decides between the small-M and the large-M tile shapes).
"""

from __future__ import annotations

import torch
import triton

from .. import config
from ..backend import check_device, interpreting, use_reference
from . import ref
from .kernel import fp8_gemm_kernel

OP = "fp8_gemm"
SCALE_GROUP = 128  # the 128-wide groups of DeepSeek-V3 block scales


def fp8_gemm(
    a: torch.Tensor,
    a_scale: torch.Tensor,
    b: torch.Tensor,
    b_scale: torch.Tensor,
    out_dtype: torch.dtype = torch.bfloat16,
) -> torch.Tensor:
    """``dequant(a) @ dequant(b).T`` in ``out_dtype``."""
    return torch.ops.pocforge.fp8_gemm(a, a_scale, b, b_scale, out_dtype)


def _scale_groups(a_scale, b_scale, m, n, k) -> tuple[int, int, int]:
    """``(a_group_k, b_group_n, b_group_k)``: how many elements share one scale."""
    kb = triton.cdiv(k, SCALE_GROUP)
    if a_scale.shape == (m, 1):
        a_group_k = k
    elif a_scale.shape == (m, kb):
        a_group_k = SCALE_GROUP
    else:
        raise ValueError(
            f"fp8_gemm: a_scale {tuple(a_scale.shape)}: expected ({m}, 1) or ({m}, {kb})"
        )
    if b_scale.shape == (n, 1):
        b_group_n, b_group_k = 1, k
    elif b_scale.shape == (triton.cdiv(n, SCALE_GROUP), kb):
        b_group_n, b_group_k = SCALE_GROUP, SCALE_GROUP
    else:
        raise ValueError(
            f"fp8_gemm: b_scale {tuple(b_scale.shape)}: expected ({n}, 1) "
            f"or ({triton.cdiv(n, SCALE_GROUP)}, {kb})"
        )
    return a_group_k, b_group_n, b_group_k


def launch(a, a_scale, b, b_scale, out_dtype):
    check_device(a, b)
    (m, k), (n, k_b) = a.shape, b.shape
    if k != k_b:
        raise ValueError(f"fp8_gemm: K mismatch, a has {k} and b has {k_b}")
    a_group_k, b_group_n, b_group_k = _scale_groups(a_scale, b_scale, m, n, k)
    if interpreting():  # numpy has no fp8: hand the exact values over as fp32
        a, b = a.to(torch.float32), b.to(torch.float32)
    a = a if a.stride(-1) == 1 else a.contiguous()
    b = b if b.stride(-1) == 1 else b.contiguous()
    a_scale, b_scale = a_scale.to(torch.float32), b_scale.to(torch.float32)
    out = torch.empty((m, n), dtype=out_dtype, device=a.device)
    cfg = config.launch_config(OP, m, device=a.device)
    # One K step must not straddle a scale group.
    block_k = cfg["BLOCK_K"]
    if SCALE_GROUP in (a_group_k, b_group_k):
        block_k = min(block_k, SCALE_GROUP)  # powers of two, so it divides the group
    block_k = max(16, min(block_k, triton.next_power_of_2(k)))  # tl.dot needs K >= 16
    if m and n:
        grid = (triton.cdiv(m, cfg["BLOCK_M"]) * triton.cdiv(n, cfg["BLOCK_N"]),)
        fp8_gemm_kernel[grid](
            a,
            b,
            a_scale,
            b_scale,
            out,
            m,
            n,
            k,
            a.stride(0),
            b.stride(0),
            out.stride(0),
            a_scale.stride(0),
            a_scale.stride(1),
            b_scale.stride(0),
            b_scale.stride(1),
            a_group_k,
            b_group_n,
            b_group_k,
            BLOCK_M=cfg["BLOCK_M"],
            BLOCK_N=cfg["BLOCK_N"],
            BLOCK_K=block_k,
            GROUP_M=cfg["GROUP_M"],
            num_warps=cfg["num_warps"],
            num_stages=cfg["num_stages"],
        )
    return out


@torch.library.custom_op("pocforge::fp8_gemm", mutates_args=())
def _fp8_gemm(
    a: torch.Tensor,
    a_scale: torch.Tensor,
    b: torch.Tensor,
    b_scale: torch.Tensor,
    out_dtype: torch.dtype,
) -> torch.Tensor:
    if use_reference():
        return ref.fp8_gemm(a, a_scale, b, b_scale, out_dtype)
    return launch(a, a_scale, b, b_scale, out_dtype)


@_fp8_gemm.register_fake
def _(a, a_scale, b, b_scale, out_dtype):
    return a.new_empty((a.shape[0], b.shape[0]), dtype=out_dtype)
