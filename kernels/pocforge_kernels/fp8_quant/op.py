"""fp8 quantization: ``pocforge::per_token_quant_fp8`` and ``pocforge::per_block_quant_fp8``.

Shapes: ``x [M, K]`` -> ``(q [M, K] fp8, scale fp32)`` with ``scale [M, 1]`` per
token, ``[M, K // g]`` per 1 x g group, ``[ceil(M/b), ceil(K/b)]`` per b x b
block.  ``fp8_dtype`` defaults to the device's native e4m3 flavour
(:func:`default_fp8_dtype`).  The maths is in :mod:`.ref`.  Launch configs:
``configs/<arch>.json`` keyed by the group width.
"""

from __future__ import annotations

import torch
import triton

from .. import config
from ..arch import current_arch
from ..backend import check_device, interpreting, use_reference
from . import ref
from .kernel import per_block_quant_kernel, per_token_group_quant_kernel

OP = "fp8_quant"
# MI300-class GPUs (gfx942) implement the fnuz variant in hardware; everything newer is OCP.
FNUZ_ARCHS = ("gfx940", "gfx941", "gfx942")


def default_fp8_dtype(device=None) -> torch.dtype:
    """``float8_e4m3fnuz`` on gfx942 (MI300X/MI325X), ``float8_e4m3fn`` elsewhere."""
    return torch.float8_e4m3fnuz if current_arch(device) in FNUZ_ARCHS else torch.float8_e4m3fn


def per_token_quant_fp8(
    x: torch.Tensor, fp8_dtype: torch.dtype | None = None, group_size: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token (or per 1 x ``group_size``) dynamic quantization of ``x [M, K]``."""
    return torch.ops.pocforge.per_token_quant_fp8(
        x, fp8_dtype or default_fp8_dtype(x.device), group_size
    )


def per_block_quant_fp8(
    x: torch.Tensor, fp8_dtype: torch.dtype | None = None, block_size: int = 128
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per ``block_size`` x ``block_size`` dynamic quantization of ``x [N, K]`` (weights)."""
    return torch.ops.pocforge.per_block_quant_fp8(
        x, fp8_dtype or default_fp8_dtype(x.device), block_size
    )


def _store_dtype(fp8_dtype: torch.dtype) -> torch.dtype:
    """What the kernel writes: fp8 itself, or fp32 under the interpreter (cast after)."""
    return torch.float32 if interpreting() else fp8_dtype


def launch_per_token(x, fp8_dtype, group_size=None):
    check_device(x)
    fmax = ref.fp8_max(fp8_dtype)
    m, k = x.shape
    g = group_size or k
    if k % g:
        raise ValueError(f"per_token_quant_fp8: group_size {g} must divide K={k}")
    if x.stride(-1) != 1:
        x = x.contiguous()
    q = torch.empty((m, k), dtype=_store_dtype(fp8_dtype), device=x.device)
    scale = torch.empty((m, k // g), dtype=torch.float32, device=x.device)
    cfg = config.launch_config(OP, g, device=x.device)
    if m and k:
        per_token_group_quant_kernel[(m, k // g)](
            x,
            q,
            scale,
            g,
            x.stride(0),
            q.stride(0),
            scale.stride(0),
            fmax,
            ref.EPS,
            BLOCK=min(cfg["BLOCK"], triton.next_power_of_2(g)),
            num_warps=cfg["num_warps"],
        )
    return q.to(fp8_dtype), scale


def launch_per_block(x, fp8_dtype, block_size=128):
    check_device(x)
    fmax = ref.fp8_max(fp8_dtype)
    n, k = x.shape
    if block_size & (block_size - 1):
        raise ValueError(f"per_block_quant_fp8: block_size {block_size} must be a power of two")
    if x.stride(-1) != 1:
        x = x.contiguous()
    nb, kb = triton.cdiv(n, block_size), triton.cdiv(k, block_size)
    q = torch.empty((n, k), dtype=_store_dtype(fp8_dtype), device=x.device)
    scale = torch.empty((nb, kb), dtype=torch.float32, device=x.device)
    cfg = config.launch_config(OP, block_size, device=x.device)
    if n and k:
        per_block_quant_kernel[(nb, kb)](
            x,
            q,
            scale,
            n,
            k,
            x.stride(0),
            q.stride(0),
            scale.stride(0),
            fmax,
            ref.EPS,
            BLOCK=block_size,
            num_warps=cfg["num_warps_block"],
        )
    return q.to(fp8_dtype), scale


@torch.library.custom_op("pocforge::per_token_quant_fp8", mutates_args=())
def _per_token_quant_fp8(
    x: torch.Tensor, fp8_dtype: torch.dtype, group_size: int | None
) -> tuple[torch.Tensor, torch.Tensor]:
    if use_reference():
        return ref.per_token_quant_fp8(x, fp8_dtype, group_size)
    return launch_per_token(x, fp8_dtype, group_size)


@_per_token_quant_fp8.register_fake
def _(x, fp8_dtype, group_size):
    m, k = x.shape
    return x.new_empty((m, k), dtype=fp8_dtype), x.new_empty(
        (m, k // (group_size or k)), dtype=torch.float32
    )


@torch.library.custom_op("pocforge::per_block_quant_fp8", mutates_args=())
def _per_block_quant_fp8(
    x: torch.Tensor, fp8_dtype: torch.dtype, block_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    if use_reference():
        return ref.per_block_quant_fp8(x, fp8_dtype, block_size)
    return launch_per_block(x, fp8_dtype, block_size)


@_per_block_quant_fp8.register_fake
def _(x, fp8_dtype, block_size):
    n, k = x.shape
    nb, kb = -(-n // block_size), -(-k // block_size)
    return x.new_empty((n, k), dtype=fp8_dtype), x.new_empty((nb, kb), dtype=torch.float32)
