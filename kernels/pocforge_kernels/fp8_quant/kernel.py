"""Triton bodies of dynamic fp8 quantization.

Both kernels find the amax of their group, derive the fp32 scale and store
``clamp(x / scale)`` in the output's type: fp8 on a GPU, fp32 under the Triton
interpreter (numpy has no fp8; the launcher then casts with torch, the same
round-to-nearest-even).
"""

import triton
import triton.language as tl


@triton.jit
def per_token_group_quant_kernel(
    x_ptr,
    q_ptr,
    scale_ptr,
    group_size,
    x_stride,
    q_stride,
    scale_stride,
    fp8_max,
    eps,
    BLOCK: tl.constexpr,
):
    """One program per (row, group); the group is walked in BLOCK chunks, twice."""
    row = tl.program_id(0).to(tl.int64)
    start = tl.program_id(1).to(tl.int64) * group_size
    x_row = x_ptr + row * x_stride + start
    q_row = q_ptr + row * q_stride + start
    amax = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, group_size, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < group_size, other=0.0).to(tl.float32)
        amax = tl.maximum(amax, tl.abs(x))
    scale = tl.maximum(tl.max(amax, axis=0), eps) / fp8_max
    tl.store(scale_ptr + row * scale_stride + tl.program_id(1), scale)
    for off in range(0, group_size, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < group_size
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        q = tl.minimum(tl.maximum(x / scale, -fp8_max), fp8_max)
        tl.store(q_row + cols, q.to(q_ptr.dtype.element_ty), mask=mask)


@triton.jit
def per_block_quant_kernel(
    x_ptr,
    q_ptr,
    scale_ptr,
    n_rows,
    n_cols,
    x_stride,
    q_stride,
    scale_stride,
    fp8_max,
    eps,
    BLOCK: tl.constexpr,
):
    """One program per BLOCK x BLOCK tile; the tile fits in registers (128 x 128 fp32 = 64 KiB)."""
    bn = tl.program_id(0)
    bk = tl.program_id(1)
    rows = bn * BLOCK + tl.arange(0, BLOCK)
    cols = bk * BLOCK + tl.arange(0, BLOCK)
    mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
    r64 = rows[:, None].to(tl.int64)
    x = tl.load(x_ptr + r64 * x_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    scale = tl.maximum(tl.max(tl.max(tl.abs(x), axis=1), axis=0), eps) / fp8_max
    tl.store(scale_ptr + bn * scale_stride + bk, scale)
    q = tl.minimum(tl.maximum(x / scale, -fp8_max), fp8_max)
    tl.store(q_ptr + r64 * q_stride + cols[None, :], q.to(q_ptr.dtype.element_ty), mask=mask)
