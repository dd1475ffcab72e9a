"""Triton bodies of the gated activations, forward and backward.

Elementwise over ``[rows, d]`` tiles; the activation is a compile-time string so
one body serves SiLU, GELU (erf) and GELU (tanh).  tanh is written through the
sigmoid, ``tanh(u) = 2 sigmoid(2u) - 1``, because ``tl`` has no tanh.
Module constants are ``tl.constexpr``: compiled Triton refuses other globals.
"""

import triton
import triton.language as tl

SQRT1_2 = tl.constexpr(0.7071067811865476)  # 1 / sqrt(2)
SQRT2_PI = tl.constexpr(0.7978845608028654)  # sqrt(2 / pi), the tanh-GELU constant
INV_SQRT_2PI = tl.constexpr(0.3989422804014327)  # 1 / sqrt(2 pi), the normal density's factor
GELU_CUBIC = tl.constexpr(0.044715)  # Hendrycks & Gimpel 2016, the tanh approximation


@triton.jit
def _act_and_grad(g, ACT: tl.constexpr):
    """``(act(g), act'(g))`` in fp32."""
    if ACT == "silu":
        s = tl.sigmoid(g)
        return g * s, s * (1.0 + g * (1.0 - s))
    elif ACT == "gelu":
        cdf = 0.5 * (1.0 + tl.erf(g * SQRT1_2))
        return g * cdf, cdf + g * INV_SQRT_2PI * tl.exp(-0.5 * g * g)
    else:
        u = SQRT2_PI * (g + GELU_CUBIC * g * g * g)
        # tanh is +-1 in fp32 beyond |u| = 10; clamping keeps exp() finite (no inf / inf).
        u = tl.minimum(tl.maximum(u, -10.0), 10.0)
        t = 2.0 * tl.sigmoid(2.0 * u) - 1.0
        du = SQRT2_PI * (1.0 + 3.0 * GELU_CUBIC * g * g)
        return 0.5 * g * (1.0 + t), 0.5 * (1.0 + t) + 0.5 * g * (1.0 - t * t) * du


@triton.jit
def act_and_mul_fwd_kernel(
    x_ptr,
    out_ptr,
    n_rows,
    d,
    x_stride,
    out_stride,
    ACT: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows < n_rows)[:, None] & (cols < d)[None, :]
    x_row = x_ptr + rows[:, None].to(tl.int64) * x_stride
    gate = tl.load(x_row + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_row + d + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    act, _ = _act_and_grad(gate, ACT)
    out = out_ptr + rows[:, None].to(tl.int64) * out_stride + cols[None, :]
    tl.store(out, (act * up).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def act_and_mul_bwd_kernel(
    dy_ptr,
    x_ptr,
    dx_ptr,
    n_rows,
    d,
    dy_stride,
    x_stride,
    dx_stride,
    ACT: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """``d gate = dy * up * act'(gate)``, ``d up = dy * act(gate)``."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows < n_rows)[:, None] & (cols < d)[None, :]
    r64 = rows[:, None].to(tl.int64)
    gate = tl.load(x_ptr + r64 * x_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + r64 * x_stride + d + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + r64 * dy_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    act, dact = _act_and_grad(gate, ACT)
    dx_row = dx_ptr + r64 * dx_stride
    tl.store(dx_row + cols[None, :], (dy * up * dact).to(dx_ptr.dtype.element_ty), mask=mask)
    tl.store(dx_row + d + cols[None, :], (dy * act).to(dx_ptr.dtype.element_ty), mask=mask)
