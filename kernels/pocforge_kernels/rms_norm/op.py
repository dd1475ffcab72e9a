"""RMSNorm entry points: ``pocforge::rms_norm``, ``pocforge::fused_add_rms_norm``.

Shapes: ``x [..., H]`` (any leading dims, last dim contiguous), ``weight [H]``,
``residual`` like ``x``.  Outputs have x's dtype.  Both ops are differentiable
(backward kernel in :mod:`.kernel`), which the Hugging Face integration uses.
Launch configs: ``configs/<arch>.json`` keyed by hidden size.
"""

from __future__ import annotations

import torch
import triton

from .. import config
from ..arch import num_compute_units
from ..backend import check_device, use_reference
from . import ref
from .kernel import rms_norm_bwd_kernel, rms_norm_fwd_kernel

OP = "rms_norm"


def rms_norm(
    x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, residual: torch.Tensor | None = None
):
    """RMSNorm of ``x``; with ``residual``, returns ``(y, x + residual)`` (see :mod:`.ref`)."""
    if residual is None:
        return torch.ops.pocforge.rms_norm(x, weight, eps)
    return torch.ops.pocforge.fused_add_rms_norm(x, residual, weight, eps)


def _rows(t: torch.Tensor) -> torch.Tensor:
    """``t`` as ``[rows, H]`` with a unit last stride (a view when possible)."""
    t2 = t.reshape(-1, t.shape[-1])
    return t2 if t2.stride(-1) == 1 else t2.contiguous()


def _block(n_cols: int, cfg: dict) -> int:
    return min(triton.next_power_of_2(n_cols), cfg["BLOCK"])


def launch_forward(x, weight, eps, residual=None, out=None, residual_out=None):
    """Run the forward kernel into ``out`` (and ``residual_out``), allocating what is None."""
    check_device(x, weight, residual)
    x2 = _rows(x)
    n_rows, n_cols = x2.shape
    out = torch.empty_like(x) if out is None else out
    out2 = out.view(-1, n_cols)
    has_res = residual is not None
    if has_res:
        res2 = _rows(residual)
        residual_out = torch.empty_like(x) if residual_out is None else residual_out
        res_out2 = residual_out.view(-1, n_cols)
    else:
        res2 = res_out2 = x2  # unused; the constexpr branch is compiled out
    cfg = config.launch_config(OP, n_cols, device=x.device)
    block = _block(n_cols, cfg)
    # Small rows share a program until the tile holds TILE elements (one row when BLOCK >= TILE).
    block_m = min(max(1, cfg["TILE"] // block), triton.next_power_of_2(n_rows))
    if n_rows:
        rms_norm_fwd_kernel[(triton.cdiv(n_rows, block_m),)](
            x2,
            res2,
            weight,
            out2,
            res_out2,
            n_rows,
            n_cols,
            x2.stride(0),
            res2.stride(0),
            out2.stride(0),
            res_out2.stride(0),
            eps,
            HAS_RESIDUAL=has_res,
            BLOCK_M=block_m,
            BLOCK=block,
            num_warps=cfg["num_warps"],
        )
    return (out, residual_out) if has_res else out


def launch_backward(grad, x, weight, eps):
    """``(dx, dw)`` of RMSNorm; dw is summed from per-program fp32 partials."""
    check_device(grad, x, weight)
    x2, dy2 = _rows(x), _rows(grad)
    n_rows, n_cols = x2.shape
    dx = torch.empty_like(x)
    dx2 = dx.view(-1, n_cols)
    cfg = config.launch_config(OP, n_cols, device=x.device)
    programs = max(1, min(n_rows, num_compute_units(x.device) * cfg["bwd_programs_per_unit"]))
    rows_per_program = triton.cdiv(n_rows, programs) if n_rows else 0
    dw_partial = torch.zeros((programs, n_cols), dtype=torch.float32, device=x.device)
    if n_rows:
        rms_norm_bwd_kernel[(programs,)](
            dy2,
            x2,
            weight,
            dx2,
            dw_partial,
            n_rows,
            n_cols,
            dy2.stride(0),
            x2.stride(0),
            dx2.stride(0),
            rows_per_program,
            eps,
            BLOCK=_block(n_cols, cfg),
            num_warps=cfg["num_warps"],
        )
    return dx, dw_partial.sum(0).to(weight.dtype)


@torch.library.custom_op("pocforge::rms_norm", mutates_args=())
def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    if use_reference():
        return ref.rms_norm(x, weight, eps)
    return launch_forward(x, weight, eps)


@_rms_norm.register_fake
def _(x, weight, eps):
    return torch.empty_like(x)


@torch.library.custom_op("pocforge::fused_add_rms_norm", mutates_args=())
def _fused_add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    if use_reference():
        return ref.fused_add_rms_norm(x, residual, weight, eps)
    return launch_forward(x, weight, eps, residual=residual)


@_fused_add_rms_norm.register_fake
def _(x, residual, weight, eps):
    return torch.empty_like(x), torch.empty_like(x)


@torch.library.custom_op("pocforge::rms_norm_backward", mutates_args=())
def _rms_norm_backward(
    grad: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    if use_reference():
        return ref.rms_norm_backward(grad, x, weight, eps)
    return launch_backward(grad, x, weight, eps)


@_rms_norm_backward.register_fake
def _(grad, x, weight, eps):
    return torch.empty_like(x), torch.empty_like(weight)


def _setup_plain(ctx, inputs, output):
    x, weight, eps = inputs
    ctx.save_for_backward(x, weight)
    ctx.eps = eps


def _backward_plain(ctx, grad):
    x, weight = ctx.saved_tensors
    dx, dw = torch.ops.pocforge.rms_norm_backward(grad, x, weight, ctx.eps)
    return dx, dw, None


def _setup_fused(ctx, inputs, output):
    _, _, weight, eps = inputs
    ctx.save_for_backward(output[1], weight)  # the normalised tensor is the new residual
    ctx.eps = eps


def _backward_fused(ctx, grad_out, grad_residual):
    summed, weight = ctx.saved_tensors
    dsum, dw = torch.ops.pocforge.rms_norm_backward(grad_out, summed, weight, ctx.eps)
    if grad_residual is not None:
        dsum = dsum + grad_residual
    return dsum, dsum, dw, None


_rms_norm.register_autograd(_backward_plain, setup_context=_setup_plain)
_fused_add_rms_norm.register_autograd(_backward_fused, setup_context=_setup_fused)
