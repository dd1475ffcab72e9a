"""Triton body of FlashAttention-2 prefill over packed variable-length sequences.

Dao 2023, "FlashAttention-2: Faster Attention with Better Parallelism and Work
Partitioning", Algorithm 1: each program owns a ``BLOCK_M`` tile of one
sequence's queries for one head and streams that sequence's keys and values in
``BLOCK_N`` tiles, keeping a running max ``m``, a running sum ``l`` and an
unnormalised accumulator (online softmax, Milakov & Gimelshein 2018), divided
by ``l`` once at the end.  Exponentials are base 2 with ``log2(e)`` folded into
the scale.  Causal tiles stop at the diagonal, so the work is about halved.
"""

import triton
import triton.language as tl

# A finite stand-in for -inf as the initial running max: exp2(-inf - (-inf)) would be NaN.
NEG_BIG = tl.constexpr(-1.0e30)


@triton.jit
def flash_attention_prefill_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    o_ptr,
    cu_seqlens_ptr,
    q_stride_t,
    q_stride_h,
    k_stride_t,
    k_stride_h,
    v_stride_t,
    v_stride_h,
    o_stride_t,
    o_stride_h,
    qk_scale,
    head_dim,
    group,
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    UPCAST: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    pid_m = tl.program_id(0)
    seq = tl.program_id(1)
    head = tl.program_id(2)
    kv_head = head // group
    start = tl.load(cu_seqlens_ptr + seq).to(tl.int64)
    seqlen = (tl.load(cu_seqlens_ptr + seq + 1) - start).to(tl.int32)

    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    d = tl.arange(0, BLOCK_D)
    row_mask = rows < seqlen
    d_mask = d < head_dim
    q = tl.load(
        q_ptr + (start + rows[:, None]) * q_stride_t + head * q_stride_h + d[None, :],
        mask=row_mask[:, None] & d_mask[None, :],
        other=0.0,
    )
    if UPCAST:
        q = q.to(tl.float32)

    m_i = tl.full([BLOCK_M], NEG_BIG, dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)

    hi = seqlen
    if CAUSAL:
        hi = tl.minimum(seqlen, (pid_m + 1) * BLOCK_M)
    hi = tl.where(pid_m * BLOCK_M < seqlen, hi, 0)  # tiles past this sequence's end idle
    k_base = k_ptr + kv_head * k_stride_h
    v_base = v_ptr + kv_head * v_stride_h
    for n0 in range(0, hi, BLOCK_N):
        cols = n0 + tl.arange(0, BLOCK_N)
        col_mask = cols < seqlen
        kt = tl.load(
            k_base + (start + cols[None, :]) * k_stride_t + d[:, None],
            mask=d_mask[:, None] & col_mask[None, :],
            other=0.0,
        )  # [BLOCK_D, BLOCK_N]
        v = tl.load(
            v_base + (start + cols[:, None]) * v_stride_t + d[None, :],
            mask=col_mask[:, None] & d_mask[None, :],
            other=0.0,
        )
        if UPCAST:
            kt = kt.to(tl.float32)
            v = v.to(tl.float32)
        s = tl.dot(q, kt, input_precision=DOT_PRECISION) * qk_scale
        keep = col_mask[None, :]
        if CAUSAL:
            keep = keep & (cols[None, :] <= rows[:, None])
        s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=DOT_PRECISION)
        m_i = m_new

    out = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
    tl.store(
        o_ptr + (start + rows[:, None]) * o_stride_t + head * o_stride_h + d[None, :],
        out.to(o_ptr.dtype.element_ty),
        mask=row_mask[:, None] & d_mask[None, :],
    )
