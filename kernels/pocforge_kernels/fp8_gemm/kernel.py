"""Triton body of the scaled fp8 GEMM: tiled ``A @ B.T`` with scales applied per K step.

The K loop walks ``BLOCK_K`` columns at a time; ``BLOCK_K`` divides the 128-wide
scale groups, so every step sees one A-scale per row and one B-scale per column.
Each partial product is scaled before it joins the fp32 accumulator — the
DeepSeek-V3 recipe ("fine-grained quantization", technical report section 3.3.2;
vLLM's ``w8a8_block_fp8_matmul``).  For per-token / per-channel scales the group
is all of K and the same scales repeat every step.  Under the interpreter the
fp8 operands arrive upcast to fp32, which is exact.
"""

import triton
import triton.language as tl


@triton.jit
def fp8_gemm_kernel(
    a_ptr,
    b_ptr,
    a_s_ptr,
    b_s_ptr,
    c_ptr,
    M,
    N,
    K,
    a_stride_m,
    b_stride_n,
    c_stride_m,
    a_s_stride_m,
    a_s_stride_k,
    b_s_stride_n,
    b_s_stride_k,
    a_group_k,
    b_group_n,
    b_group_k,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    # Grouped ordering of tiles (Triton's matmul tutorial): neighbouring programs
    # share A rows, which keeps them in L2.
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    group_rows = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % group_rows
    pid_n = (pid % per_group) // group_rows

    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    row_mask = rows < M
    col_mask = cols < N
    a_tile = a_ptr + rows[:, None].to(tl.int64) * a_stride_m + ks[None, :]
    b_tile = b_ptr + cols[None, :].to(tl.int64) * b_stride_n + ks[:, None]
    a_s_rows = a_s_ptr + rows * a_s_stride_m
    b_s_cols = b_s_ptr + (cols // b_group_n) * b_s_stride_n

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_mask = (k0 + ks) < K
        a = tl.load(a_tile + k0, mask=row_mask[:, None] & k_mask[None, :], other=0.0)
        b = tl.load(b_tile + k0, mask=k_mask[:, None] & col_mask[None, :], other=0.0)
        a_s = tl.load(a_s_rows + (k0 // a_group_k) * a_s_stride_k, mask=row_mask, other=0.0)
        b_s = tl.load(b_s_cols + (k0 // b_group_k) * b_s_stride_k, mask=col_mask, other=0.0)
        acc += tl.dot(a, b) * a_s[:, None] * b_s[None, :]

    c = c_ptr + rows[:, None].to(tl.int64) * c_stride_m + cols[None, :]
    tl.store(c, acc.to(c_ptr.dtype.element_ty), mask=row_mask[:, None] & col_mask[None, :])
