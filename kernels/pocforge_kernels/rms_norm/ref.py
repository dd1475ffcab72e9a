"""RMSNorm in plain torch: the spec the Triton kernel is tested against.

Maths (Zhang & Sennrich 2019, "Root Mean Square Layer Normalization")::

    y = x / sqrt(mean(x**2, -1) + eps) * w          x: [..., H], w: [H]

With the fused residual add (vLLM's ``fused_add_rms_norm``, out of place here)::

    r = (x + residual) rounded to x.dtype          # the new residual stream
    y = rms_norm(r)

Normalising the *rounded* sum makes the fused op equal, bit for bit in intent,
to the unfused ``residual = x + residual; y = norm(residual)`` a model runs.
Arithmetic is at least fp32 (float64 stays float64), the output has x's dtype.
"""

from __future__ import annotations

import torch


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.promote_types(dtype, torch.float32)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """``x [..., H]``, ``weight [H]`` -> ``y [..., H]`` in x's dtype."""
    ct = _compute_dtype(x.dtype)
    xf = x.to(ct)
    rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (xf * rstd * weight.to(ct)).to(x.dtype)


def fused_add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x + residual) -> r``; returns ``(rms_norm(r), r)``, both in x's dtype."""
    ct = _compute_dtype(x.dtype)
    r = (x.to(ct) + residual.to(ct)).to(x.dtype)
    return rms_norm(r, weight, eps), r


def rms_norm_backward(
    grad: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradients of :func:`rms_norm`: ``(dx [..., H] in x's dtype, dw [H] in w's dtype)``.

    With ``r = rstd = (mean(x**2) + eps)**-1/2`` and ``g = dy * w``::

        dx = r * g - r**3 * x * mean(g * x)
        dw = sum over rows of dy * x * r
    """
    ct = _compute_dtype(x.dtype)
    xf, gf, wf = x.to(ct), grad.to(ct), weight.to(ct)
    rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    g = gf * wf
    dx = rstd * g - rstd.pow(3) * xf * (g * xf).mean(-1, keepdim=True)
    dw = (gf * xf * rstd).reshape(-1, x.shape[-1]).sum(0)
    return dx.to(x.dtype), dw.to(weight.dtype)
