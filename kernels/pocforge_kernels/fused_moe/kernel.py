"""Triton bodies of the fused MoE layer: top-k softmax routing and the grouped GEMM.

The grouped GEMM is vLLM's ``fused_moe_kernel`` design (after the MegaBlocks
idea, Gale et al. 2022, "MegaBlocks: Efficient Sparse Training with
Mixture-of-Experts"): the (token, expert) pairs are sorted by expert and each
expert's list is padded to a multiple of ``BLOCK_M``, so every ``BLOCK_M`` rows
of the sorted list belong to one expert and one program multiplies them by that
expert's weight tile.  Padding slots hold a sentinel (the number of pairs) and
are masked; blocks past the padded total have expert id -1 and idle.
"""

import triton
import triton.language as tl


@triton.jit
def topk_softmax_kernel(
    logits_ptr,
    weights_ptr,
    ids_ptr,
    n_experts,
    logits_stride,
    TOP_K: tl.constexpr,
    RENORMALIZE: tl.constexpr,
    BLOCK_E: tl.constexpr,
):
    """One program per token: softmax over experts, then TOP_K rounds of argmax."""
    tok = tl.program_id(0).to(tl.int64)
    e = tl.arange(0, BLOCK_E)
    e_mask = e < n_experts
    x = tl.load(logits_ptr + tok * logits_stride + e, mask=e_mask, other=float("-inf"))
    x = x.to(tl.float32)
    num = tl.exp(x - tl.max(x, axis=0))
    p = num / tl.sum(num, axis=0)
    total = 1.0
    if RENORMALIZE:
        # A first selection pass finds the sum of the top-k weights to divide by.
        q = tl.where(e_mask, p, -1.0)
        total = 0.0
        for _ in tl.static_range(TOP_K):
            best = tl.max(q, axis=0)
            total += best
            q = tl.where(e == tl.argmax(q, axis=0), -1.0, q)
    p = tl.where(e_mask, p, -1.0)
    for j in tl.static_range(TOP_K):
        best = tl.max(p, axis=0)
        idx = tl.argmax(p, axis=0)
        tl.store(weights_ptr + tok * TOP_K + j, best / total)
        tl.store(ids_ptr + tok * TOP_K + j, idx.to(tl.int32))
        p = tl.where(e == idx, -1.0, p)


@triton.jit
def moe_grouped_gemm_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    topk_weights_ptr,
    sorted_ids_ptr,
    expert_ids_ptr,
    N,
    K,
    num_pairs,
    a_rows_per_pair,
    a_stride_m,
    b_stride_e,
    b_stride_n,
    c_stride_m,
    MUL_ROUTED_WEIGHT: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    UPCAST: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    """``C[pair] = A[pair // a_rows_per_pair] @ B[expert].T`` for one BLOCK_M x BLOCK_N tile.

    For the first GEMM A is the token matrix (``a_rows_per_pair = top_k``: pair
    ``t * k + j`` reads token t); for the second, A holds one row per pair (1).
    """
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    expert = tl.load(expert_ids_ptr + pid_m).to(tl.int64)
    pairs = tl.load(sorted_ids_ptr + pid_m * BLOCK_M + tl.arange(0, BLOCK_M))
    pair_mask = pairs < num_pairs
    rows = tl.where(pair_mask, pairs // a_rows_per_pair, 0).to(tl.int64)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < N
    ks = tl.arange(0, BLOCK_K)
    a_tile = a_ptr + rows[:, None] * a_stride_m + ks[None, :]
    b_tile = b_ptr + expert * b_stride_e + cols[None, :].to(tl.int64) * b_stride_n + ks[:, None]

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    k_end = tl.where(expert >= 0, K, 0)  # padding blocks past the sorted total do no work
    for k0 in range(0, k_end, BLOCK_K):
        k_mask = (k0 + ks) < K
        a = tl.load(a_tile + k0, mask=pair_mask[:, None] & k_mask[None, :], other=0.0)
        b = tl.load(b_tile + k0, mask=k_mask[:, None] & col_mask[None, :], other=0.0)
        if UPCAST:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc += tl.dot(a, b, input_precision=DOT_PRECISION)
    if MUL_ROUTED_WEIGHT:
        w = tl.load(topk_weights_ptr + pairs, mask=pair_mask, other=0.0)
        acc = acc * w[:, None]
    c = c_ptr + pairs[:, None].to(tl.int64) * c_stride_m + cols[None, :]
    tl.store(c, acc.to(c_ptr.dtype.element_ty), mask=pair_mask[:, None] & col_mask[None, :])
