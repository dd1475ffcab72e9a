"""Triton body of the rotary embedding: one program per token, all its heads.

The token's ``cos``/``sin`` row is loaded once and reused for every query and
key head (vLLM's CUDA kernel does the same per thread block).  Feature indices
of the two halves of each pair depend on the style: NeoX ``(i, i + half)``,
GPT-J ``(2i, 2i + 1)``.
"""

import triton
import triton.language as tl


@triton.jit
def _rotate_heads(
    base_ptr, tok_stride, head_stride, n_heads, tok, i1, i2, cos, sin, d_mask, BLOCK_H: tl.constexpr
):
    for h0 in range(0, n_heads, BLOCK_H):
        heads = h0 + tl.arange(0, BLOCK_H)
        mask = (heads < n_heads)[:, None] & d_mask[None, :]
        ptr = base_ptr + tok * tok_stride + heads[:, None].to(tl.int64) * head_stride
        x1 = tl.load(ptr + i1[None, :], mask=mask, other=0.0).to(tl.float32)
        x2 = tl.load(ptr + i2[None, :], mask=mask, other=0.0).to(tl.float32)
        out1 = x1 * cos[None, :] - x2 * sin[None, :]
        out2 = x2 * cos[None, :] + x1 * sin[None, :]
        tl.store(ptr + i1[None, :], out1.to(base_ptr.dtype.element_ty), mask=mask)
        tl.store(ptr + i2[None, :], out2.to(base_ptr.dtype.element_ty), mask=mask)


@triton.jit
def rotary_embedding_kernel(
    pos_ptr,
    q_ptr,
    k_ptr,
    cache_ptr,
    q_tok_stride,
    q_head_stride,
    k_tok_stride,
    k_head_stride,
    cache_stride,
    n_q_heads,
    n_k_heads,
    half,
    IS_NEOX: tl.constexpr,
    HAS_KEY: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_HALF: tl.constexpr,
):
    tok = tl.program_id(0).to(tl.int64)
    pos = tl.load(pos_ptr + tok).to(tl.int64)
    d = tl.arange(0, BLOCK_HALF)
    d_mask = d < half
    cos = tl.load(cache_ptr + pos * cache_stride + d, mask=d_mask, other=0.0).to(tl.float32)
    sin = tl.load(cache_ptr + pos * cache_stride + half + d, mask=d_mask, other=0.0).to(tl.float32)
    if IS_NEOX:
        i1 = d
        i2 = d + half
    else:
        i1 = 2 * d
        i2 = 2 * d + 1
    _rotate_heads(
        q_ptr, q_tok_stride, q_head_stride, n_q_heads, tok, i1, i2, cos, sin, d_mask, BLOCK_H
    )
    if HAS_KEY:
        _rotate_heads(
            k_ptr, k_tok_stride, k_head_stride, n_k_heads, tok, i1, i2, cos, sin, d_mask, BLOCK_H
        )
