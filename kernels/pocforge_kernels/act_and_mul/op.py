"""Gated activation entry points: ``pocforge::silu_and_mul``, ``pocforge::gelu_and_mul``.

``x [..., 2d] -> [..., d]`` (gate first, then up, as vLLM lays it out); both ops
are differentiable through ``pocforge::act_and_mul_backward``.  The maths is in
:mod:`.ref`.  Launch configs: ``configs/<arch>.json`` keyed by ``d``.
"""

from __future__ import annotations

import torch
import triton

from .. import config
from ..backend import check_device, use_reference
from . import ref
from .kernel import act_and_mul_bwd_kernel, act_and_mul_fwd_kernel

OP = "act_and_mul"


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """``silu(x[..., :d]) * x[..., d:]``."""
    return torch.ops.pocforge.silu_and_mul(x)


def gelu_and_mul(x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    """``gelu(x[..., :d]) * x[..., d:]``; ``approximate`` is ``"none"`` (erf) or ``"tanh"``."""
    return torch.ops.pocforge.gelu_and_mul(x, approximate)


def _rows(t: torch.Tensor) -> torch.Tensor:
    t2 = t.reshape(-1, t.shape[-1])
    return t2 if t2.stride(-1) == 1 else t2.contiguous()


def _grid_and_blocks(n_rows: int, d: int, device) -> tuple[tuple[int, int], dict]:
    cfg = config.launch_config(OP, d, device=device)
    block_n = min(cfg["BLOCK_N"], triton.next_power_of_2(d))
    grid = (triton.cdiv(n_rows, cfg["BLOCK_M"]), triton.cdiv(d, block_n))
    return grid, {"BLOCK_M": cfg["BLOCK_M"], "BLOCK_N": block_n, "num_warps": cfg["num_warps"]}


def launch_forward(x: torch.Tensor, activation: str) -> torch.Tensor:
    check_device(x)
    if x.shape[-1] % 2:
        raise ValueError(f"act_and_mul: last dimension {x.shape[-1]} must be even")
    d = x.shape[-1] // 2
    x2 = _rows(x)
    out = torch.empty((*x.shape[:-1], d), dtype=x.dtype, device=x.device)
    out2 = out.view(-1, d)
    if out2.numel():
        grid, meta = _grid_and_blocks(x2.shape[0], d, x.device)
        act_and_mul_fwd_kernel[grid](
            x2, out2, x2.shape[0], d, x2.stride(0), out2.stride(0), ACT=activation, **meta
        )
    return out


def launch_backward(grad: torch.Tensor, x: torch.Tensor, activation: str) -> torch.Tensor:
    check_device(grad, x)
    d = x.shape[-1] // 2
    x2, dy2 = _rows(x), _rows(grad)
    dx = torch.empty_like(x)
    dx2 = dx.view(-1, 2 * d)
    if dx2.numel():
        grid, meta = _grid_and_blocks(x2.shape[0], d, x.device)
        act_and_mul_bwd_kernel[grid](
            dy2,
            x2,
            dx2,
            x2.shape[0],
            d,
            dy2.stride(0),
            x2.stride(0),
            dx2.stride(0),
            ACT=activation,
            **meta,
        )
    return dx


def _gelu_name(approximate: str) -> str:
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu_and_mul: approximate must be 'none' or 'tanh', not {approximate!r}")
    return "gelu_tanh" if approximate == "tanh" else "gelu"


@torch.library.custom_op("pocforge::silu_and_mul", mutates_args=())
def _silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    if use_reference():
        return ref.silu_and_mul(x)
    return launch_forward(x, "silu")


@torch.library.custom_op("pocforge::gelu_and_mul", mutates_args=())
def _gelu_and_mul(x: torch.Tensor, approximate: str) -> torch.Tensor:
    if use_reference():
        return ref.gelu_and_mul(x, approximate)
    return launch_forward(x, _gelu_name(approximate))


@torch.library.custom_op("pocforge::act_and_mul_backward", mutates_args=())
def _act_and_mul_backward(grad: torch.Tensor, x: torch.Tensor, activation: str) -> torch.Tensor:
    if activation not in ref.ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}; expected one of {ref.ACTIVATIONS}")
    if use_reference():
        return ref.act_and_mul_backward(grad, x, activation)
    return launch_backward(grad, x, activation)


def _half_width(x):
    return x.new_empty((*x.shape[:-1], x.shape[-1] // 2))


_silu_and_mul.register_fake(_half_width)
_gelu_and_mul.register_fake(lambda x, approximate: _half_width(x))
_act_and_mul_backward.register_fake(lambda grad, x, activation: torch.empty_like(x))


def _setup_silu(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])
    ctx.activation = "silu"


def _setup_gelu(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])
    ctx.activation = _gelu_name(inputs[1])


def _backward_silu(ctx, grad):
    (x,) = ctx.saved_tensors
    return torch.ops.pocforge.act_and_mul_backward(grad, x, ctx.activation)


def _backward_gelu(ctx, grad):
    return _backward_silu(ctx, grad), None


_silu_and_mul.register_autograd(_backward_silu, setup_context=_setup_silu)
_gelu_and_mul.register_autograd(_backward_gelu, setup_context=_setup_gelu)
