"""FlashAttention prefill entry point: ``pocforge::flash_attention_prefill``.

``q [T, Hq, D]``, ``k, v [T, Hkv, D]`` (Hq a multiple of Hkv), ``cu_seqlens
[B + 1]`` int32, ``max_seqlen`` (the longest sequence; sizes the grid without a
device-to-host copy), ``scale`` (usually ``D ** -0.5``), ``causal``.  Returns
``[T, Hq, D]`` in q's dtype.  The maths is in :mod:`.ref`, the algorithm in
:mod:`.kernel`.  Launch configs: ``configs/<arch>.json`` keyed by head size.
"""

from __future__ import annotations

import math

import torch
import triton

from .. import config
from ..backend import check_device, dot_flags, use_reference
from . import ref
from .kernel import flash_attention_prefill_kernel

OP = "flash_attention_prefill"


def flash_attention_prefill(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens: torch.Tensor,
    max_seqlen: int,
    scale: float | None = None,
    causal: bool = True,
) -> torch.Tensor:
    """Attention of packed sequences; ``scale`` defaults to ``1 / sqrt(D)``."""
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    return torch.ops.pocforge.flash_attention_prefill(
        q, k, v, cu_seqlens, max_seqlen, scale, causal
    )


def launch(q, k, v, cu_seqlens, max_seqlen, scale, causal):
    check_device(q, k, v, cu_seqlens)
    n_tokens, hq, head_dim = q.shape
    hkv = k.shape[1]
    if hq % hkv:
        raise ValueError(f"flash_attention_prefill: {hq} query heads is not a multiple of {hkv}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.stride(-1) != 1:
            raise ValueError(f"flash_attention_prefill: {name}'s head dimension must be contiguous")
    out = torch.empty_like(q)
    n_seqs = cu_seqlens.numel() - 1
    cfg = config.launch_config(OP, head_dim, device=q.device)
    block_m = min(cfg["BLOCK_M"], max(16, triton.next_power_of_2(max_seqlen)))
    if n_tokens and n_seqs and max_seqlen:
        grid = (triton.cdiv(max_seqlen, block_m), n_seqs, hq)
        flash_attention_prefill_kernel[grid](
            q,
            k,
            v,
            out,
            cu_seqlens,
            q.stride(0),
            q.stride(1),
            k.stride(0),
            k.stride(1),
            v.stride(0),
            v.stride(1),
            out.stride(0),
            out.stride(1),
            scale * math.log2(math.e),
            head_dim,
            hq // hkv,
            CAUSAL=causal,
            BLOCK_M=block_m,
            BLOCK_N=cfg["BLOCK_N"],
            BLOCK_D=max(16, triton.next_power_of_2(head_dim)),
            num_warps=cfg["num_warps"],
            num_stages=cfg["num_stages"],
            **dot_flags(q.dtype),
        )
    return out


@torch.library.custom_op("pocforge::flash_attention_prefill", mutates_args=())
def _flash_attention_prefill(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens: torch.Tensor,
    max_seqlen: int,
    scale: float,
    causal: bool,
) -> torch.Tensor:
    if use_reference():
        return ref.flash_attention_prefill(q, k, v, cu_seqlens, scale, causal)
    return launch(q, k, v, cu_seqlens, max_seqlen, scale, causal)


@_flash_attention_prefill.register_fake
def _(q, k, v, cu_seqlens, max_seqlen, scale, causal):
    return torch.empty_like(q)
