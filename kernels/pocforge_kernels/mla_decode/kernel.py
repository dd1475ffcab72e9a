"""Triton body of MLA decode: split-K attention of many heads over one latent cache.

After weight absorption (see :mod:`.ref`) every head attends to the same cache
entries, so one program takes ``BLOCK_H`` heads of one sequence and loads each
cache block once for all of them (FlashMLA's and vLLM's Triton MLA decode
organisation).  Scores are the sum of two products — the 512-wide latent part
and the 64-wide rope part — and the latent block doubles as the values.  The
online softmax and the split-K partials follow :mod:`..paged_attention_decode`;
its reduction kernel combines the partials.
"""

import triton
import triton.language as tl

NEG_BIG = tl.constexpr(-1.0e30)  # finite initial max: avoids exp2(-inf - (-inf)) = NaN


@triton.jit
def mla_decode_kernel(
    q_ptr,
    kv_ptr,
    block_tables_ptr,
    context_lens_ptr,
    out_ptr,
    part_out_ptr,
    part_max_ptr,
    part_sum_ptr,
    q_stride_b,
    q_stride_h,
    kv_stride_blk,
    kv_stride_tok,
    bt_stride,
    out_stride_b,
    out_stride_h,
    qk_scale,
    num_heads,
    num_partitions,
    RANK: tl.constexpr,
    ROPE: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    PARTITION_SIZE: tl.constexpr,
    BLOCK_H: tl.constexpr,
    SPLIT: tl.constexpr,
    UPCAST: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    seq = tl.program_id(0)
    heads = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    part = tl.program_id(2)
    h_mask = heads < num_heads
    ctx = tl.load(context_lens_ptr + seq)

    r = tl.arange(0, RANK)
    e = tl.arange(0, ROPE)
    q_rows = q_ptr + seq.to(tl.int64) * q_stride_b + heads[:, None] * q_stride_h
    q_nope = tl.load(q_rows + r[None, :], mask=h_mask[:, None], other=0.0)
    q_pe = tl.load(q_rows + RANK + e[None, :], mask=h_mask[:, None], other=0.0)
    if UPCAST:
        q_nope = q_nope.to(tl.float32)
        q_pe = q_pe.to(tl.float32)

    m_i = tl.full([BLOCK_H], NEG_BIG, dtype=tl.float32)
    l_i = tl.zeros([BLOCK_H], dtype=tl.float32)
    acc = tl.zeros([BLOCK_H, RANK], dtype=tl.float32)

    offs = tl.arange(0, BLOCK_SIZE)
    first = part * PARTITION_SIZE
    last = tl.minimum(ctx, first + PARTITION_SIZE)
    table = block_tables_ptr + seq.to(tl.int64) * bt_stride
    for t0 in range(first, last, BLOCK_SIZE):
        block = tl.load(table + t0 // BLOCK_SIZE).to(tl.int64)
        tok_mask = (t0 + offs) < ctx
        entry = kv_ptr + block * kv_stride_blk + offs[:, None] * kv_stride_tok
        latent = tl.load(entry + r[None, :], mask=tok_mask[:, None], other=0.0)  # [BS, RANK]
        k_pe = tl.load(entry + RANK + e[None, :], mask=tok_mask[:, None], other=0.0)
        if UPCAST:
            latent = latent.to(tl.float32)
            k_pe = k_pe.to(tl.float32)
        s = tl.dot(q_nope, tl.trans(latent), input_precision=DOT_PRECISION)
        s += tl.dot(q_pe, tl.trans(k_pe), input_precision=DOT_PRECISION)
        s = tl.where(tok_mask[None, :], s * qk_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(
            p.to(latent.dtype), latent, input_precision=DOT_PRECISION
        )
        m_i = m_new

    out = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
    if SPLIT:
        row = (seq.to(tl.int64) * num_heads + heads) * num_partitions + part
        tl.store(part_out_ptr + row[:, None] * RANK + r[None, :], out, mask=h_mask[:, None])
        tl.store(part_max_ptr + row, m_i, mask=h_mask)
        tl.store(part_sum_ptr + row, l_i, mask=h_mask)
    else:
        tl.store(
            out_ptr + seq.to(tl.int64) * out_stride_b + heads[:, None] * out_stride_h + r[None, :],
            out.to(out_ptr.dtype.element_ty),
            mask=h_mask[:, None],
        )
