"""Triton bodies of paged decode attention: a split-K main pass and a reduction pass.

The structure is vLLM's ``paged_attention_v2`` (csrc/attention): the context of
each sequence is cut into partitions of ``PARTITION_SIZE`` tokens; one program
per (sequence, kv head, partition) walks its partition one cache block at a time
with an online softmax and writes a normalised partial output together with its
running max and sum.  The reduction program per (sequence, query head) rescales
the partials by ``exp(m_p - max_p m_p) * l_p`` and sums them — the FlashDecoding
(Dao et al. 2023, "Flash-Decoding for long-context inference") combine.  With
a single partition the main pass writes the output directly and no reduction
runs (vLLM's v1 path).

All query heads that share a kv head are processed by the same program (GQA), so
each key block is loaded once for the whole group; the group is padded to 16
rows because ``tl.dot`` needs at least 16.
"""

import triton
import triton.language as tl

NEG_BIG = tl.constexpr(-1.0e30)  # finite initial max: avoids exp2(-inf - (-inf)) = NaN


@triton.jit
def paged_attention_decode_kernel(
    q_ptr,
    k_cache_ptr,
    v_cache_ptr,
    block_tables_ptr,
    context_lens_ptr,
    out_ptr,
    part_out_ptr,
    part_max_ptr,
    part_sum_ptr,
    q_stride_b,
    q_stride_h,
    kc_stride_blk,
    kc_stride_tok,
    kc_stride_h,
    vc_stride_blk,
    vc_stride_tok,
    vc_stride_h,
    bt_stride,
    out_stride_b,
    out_stride_h,
    qk_scale,
    head_dim,
    group,
    num_partitions,
    BLOCK_SIZE: tl.constexpr,
    PARTITION_SIZE: tl.constexpr,
    BLOCK_G: tl.constexpr,
    BLOCK_D: tl.constexpr,
    SPLIT: tl.constexpr,
    UPCAST: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    seq = tl.program_id(0)
    kv_head = tl.program_id(1)
    part = tl.program_id(2)
    ctx = tl.load(context_lens_ptr + seq)

    g = tl.arange(0, BLOCK_G)
    heads = kv_head * group + g
    g_mask = g < group
    d = tl.arange(0, BLOCK_D)
    d_mask = d < head_dim
    q = tl.load(
        q_ptr + seq.to(tl.int64) * q_stride_b + heads[:, None] * q_stride_h + d[None, :],
        mask=g_mask[:, None] & d_mask[None, :],
        other=0.0,
    )
    if UPCAST:
        q = q.to(tl.float32)

    m_i = tl.full([BLOCK_G], NEG_BIG, dtype=tl.float32)
    l_i = tl.zeros([BLOCK_G], dtype=tl.float32)
    acc = tl.zeros([BLOCK_G, BLOCK_D], dtype=tl.float32)

    offs = tl.arange(0, BLOCK_SIZE)
    first = part * PARTITION_SIZE
    last = tl.minimum(ctx, first + PARTITION_SIZE)
    table = block_tables_ptr + seq.to(tl.int64) * bt_stride
    for t0 in range(first, last, BLOCK_SIZE):
        block = tl.load(table + t0 // BLOCK_SIZE).to(tl.int64)
        tok_mask = (t0 + offs) < ctx
        kt = tl.load(
            k_cache_ptr
            + block * kc_stride_blk
            + offs[None, :] * kc_stride_tok
            + kv_head * kc_stride_h
            + d[:, None],
            mask=d_mask[:, None] & tok_mask[None, :],
            other=0.0,
        )  # [BLOCK_D, BLOCK_SIZE]
        v = tl.load(
            v_cache_ptr
            + block * vc_stride_blk
            + offs[:, None] * vc_stride_tok
            + kv_head * vc_stride_h
            + d[None, :],
            mask=tok_mask[:, None] & d_mask[None, :],
            other=0.0,
        )
        if UPCAST:
            kt = kt.to(tl.float32)
            v = v.to(tl.float32)
        s = tl.dot(q, kt, input_precision=DOT_PRECISION) * qk_scale
        s = tl.where(tok_mask[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=DOT_PRECISION)
        m_i = m_new

    out = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
    mask = g_mask[:, None] & d_mask[None, :]
    if SPLIT:
        row = (seq.to(tl.int64) * group * tl.num_programs(1) + heads) * num_partitions + part
        tl.store(part_out_ptr + row[:, None].to(tl.int64) * BLOCK_D + d[None, :], out, mask=mask)
        tl.store(part_max_ptr + row, m_i, mask=g_mask)
        tl.store(part_sum_ptr + row, l_i, mask=g_mask)
    else:
        tl.store(
            out_ptr + seq.to(tl.int64) * out_stride_b + heads[:, None] * out_stride_h + d[None, :],
            out.to(out_ptr.dtype.element_ty),
            mask=mask,
        )


@triton.jit
def reduce_partitions_kernel(
    out_ptr,
    part_out_ptr,
    part_max_ptr,
    part_sum_ptr,
    context_lens_ptr,
    out_stride_b,
    out_stride_h,
    num_heads,
    num_partitions,
    head_dim,
    PARTITION_SIZE: tl.constexpr,
    BLOCK_P: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    """Combine the partials of one (sequence, query head); partials are ``[B, H, P, BLOCK_D]``."""
    seq = tl.program_id(0)
    head = tl.program_id(1)
    ctx = tl.load(context_lens_ptr + seq)
    used = tl.cdiv(ctx, PARTITION_SIZE)
    p = tl.arange(0, BLOCK_P)
    p_mask = p < used
    row = (seq.to(tl.int64) * num_heads + head) * num_partitions + p
    m = tl.load(part_max_ptr + row, mask=p_mask, other=float("-inf"))
    l_p = tl.load(part_sum_ptr + row, mask=p_mask, other=0.0)
    weight = tl.where(p_mask, tl.exp2(m - tl.max(m, axis=0)) * l_p, 0.0)
    d = tl.arange(0, BLOCK_D)
    d_mask = d < head_dim
    partial = tl.load(
        part_out_ptr + row[:, None] * BLOCK_D + d[None, :],
        mask=p_mask[:, None] & d_mask[None, :],
        other=0.0,
    )
    out = tl.sum(partial * weight[:, None], axis=0) / tl.sum(weight, axis=0)
    tl.store(
        out_ptr + seq.to(tl.int64) * out_stride_b + head * out_stride_h + d,
        out.to(out_ptr.dtype.element_ty),
        mask=d_mask,
    )
