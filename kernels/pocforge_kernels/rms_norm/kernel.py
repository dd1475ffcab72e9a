"""Triton bodies of RMSNorm (forward with optional residual add, and backward).

The forward takes ``BLOCK_M`` rows per program (one row, the vLLM / Liger layout,
for large hidden sizes; several for small ones) and walks them in ``BLOCK``-wide
chunks so any hidden size works.  Arithmetic is fp32 whatever the
storage type.
"""

import triton
import triton.language as tl


@triton.jit
def rms_norm_fwd_kernel(
    x_ptr,
    res_ptr,
    w_ptr,
    out_ptr,
    res_out_ptr,
    n_rows,
    n_cols,
    x_stride,
    res_stride,
    out_stride,
    res_out_stride,
    eps,
    HAS_RESIDUAL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < n_rows
    r64 = rows[:, None].to(tl.int64)
    x_rows = x_ptr + r64 * x_stride
    res_rows = res_ptr + r64 * res_stride
    res_out_rows = res_out_ptr + r64 * res_out_stride
    out_rows = out_ptr + r64 * out_stride

    # Pass 1: sum of squares (and the residual stream, stored once).
    sq = tl.zeros([BLOCK_M, BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = row_mask[:, None] & (cols < n_cols)[None, :]
        v = tl.load(x_rows + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        if HAS_RESIDUAL:
            v += tl.load(res_rows + cols[None, :], mask=mask, other=0.0).to(tl.float32)
            # Round to the storage type first: the norm sees what the residual stream holds.
            v_st = v.to(res_out_ptr.dtype.element_ty)
            tl.store(res_out_rows + cols[None, :], v_st, mask=mask)
            v = v_st.to(tl.float32)
        sq += v * v
    rstd = tl.rsqrt(tl.sum(sq, axis=1) / n_cols + eps)[:, None]

    # Pass 2: scale.  The sum is recomputed from the inputs rather than re-read from
    # res_out, which would be a read-after-write across threads of this program.
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        col_mask = cols < n_cols
        mask = row_mask[:, None] & col_mask[None, :]
        v = tl.load(x_rows + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        if HAS_RESIDUAL:
            v += tl.load(res_rows + cols[None, :], mask=mask, other=0.0).to(tl.float32)
            v = v.to(res_out_ptr.dtype.element_ty).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)[None, :]
        tl.store(out_rows + cols[None, :], (v * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def rms_norm_bwd_kernel(
    dy_ptr,
    x_ptr,
    w_ptr,
    dx_ptr,
    dw_partial_ptr,
    n_rows,
    n_cols,
    dy_stride,
    x_stride,
    dx_stride,
    rows_per_program,
    eps,
    BLOCK: tl.constexpr,
):
    """dx per row; dw summed over this program's rows into its own row of dw_partial.

    Each program owns a slice of rows and one fp32 row of ``dw_partial``
    ([programs, n_cols], zero-initialised), so dw needs no atomics and stays
    deterministic; the launcher sums the partials.  rstd is recomputed in the same
    pass as ``sum(dy * w * x)`` instead of being saved by the forward.
    """
    pid = tl.program_id(0)
    row_start = pid * rows_per_program
    row_end = tl.minimum(row_start + rows_per_program, n_rows)
    dw_row = dw_partial_ptr + pid.to(tl.int64) * n_cols
    for row in range(row_start, row_end):
        row64 = tl.cast(row, tl.int64)  # loop variables are plain ints in the interpreter
        dy_row = dy_ptr + row64 * dy_stride
        x_row = x_ptr + row64 * x_stride
        dx_row = dx_ptr + row64 * dx_stride
        sq = tl.zeros([BLOCK], dtype=tl.float32)
        gx = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = cols < n_cols
            x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
            dy = tl.load(dy_row + cols, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
            sq += x * x
            gx += dy * w * x
        rstd = tl.rsqrt(tl.sum(sq, axis=0) / n_cols + eps)
        mean_gx = tl.sum(gx, axis=0) / n_cols
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = cols < n_cols
            x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
            dy = tl.load(dy_row + cols, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
            dx = rstd * dy * w - rstd * rstd * rstd * x * mean_gx
            tl.store(dx_row + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
            dw = tl.load(dw_row + cols, mask=mask, other=0.0)
            tl.store(dw_row + cols, dw + dy * x * rstd, mask=mask)
