"""Gated activations in plain torch: the spec of the Triton kernels.

Shazeer 2020, "GLU Variants Improve Transformer": the MLP input projection
produces ``[gate | up]`` along the last dimension and the block computes::

    silu_and_mul(x) = silu(gate) * up                     (SwiGLU: Llama, Mixtral, Qwen, DeepSeek)
    gelu_and_mul(x) = gelu(gate) * up                     (GeGLU: Gemma)

``x [..., 2d] -> [..., d]``, the layout of vLLM's ``silu_and_mul``.  GELU is the
exact erf form, or the tanh approximation with ``approximate="tanh"``.
Arithmetic is at least fp32; the output has x's dtype.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

ACTIVATIONS = ("silu", "gelu", "gelu_tanh")


def _activate(gate: torch.Tensor, activation: str) -> torch.Tensor:
    if activation == "silu":
        return F.silu(gate)
    if activation == "gelu":
        return F.gelu(gate)
    if activation == "gelu_tanh":
        return F.gelu(gate, approximate="tanh")
    raise ValueError(f"unknown activation {activation!r}; expected one of {ACTIVATIONS}")


def act_and_mul(x: torch.Tensor, activation: str) -> torch.Tensor:
    """``act(x[..., :d]) * x[..., d:]`` for ``activation`` in :data:`ACTIVATIONS`."""
    ct = torch.promote_types(x.dtype, torch.float32)
    gate, up = x.to(ct).chunk(2, dim=-1)
    return (_activate(gate, activation) * up).to(x.dtype)


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    return act_and_mul(x, "silu")


def gelu_and_mul(x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    return act_and_mul(x, "gelu_tanh" if approximate == "tanh" else "gelu")


def act_and_mul_backward(grad: torch.Tensor, x: torch.Tensor, activation: str) -> torch.Tensor:
    """``d(act_and_mul)/dx`` contracted with ``grad [..., d]``: ``[..., 2d]`` in x's dtype."""
    ct = torch.promote_types(x.dtype, torch.float32)
    xf = x.detach().to(ct).requires_grad_(True)
    gate, up = xf.chunk(2, dim=-1)
    (dx,) = torch.autograd.grad(_activate(gate, activation) * up, xf, grad.to(ct))
    return dx.to(x.dtype)
