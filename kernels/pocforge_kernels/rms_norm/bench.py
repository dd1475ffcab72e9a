"""RMSNorm's benchmark case and the variants the compile check adds (see :mod:`..bench.case`)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .. import load
from ..bench.case import Case, randn, size, vllm_ops
from . import ref


def rms_norm(m, w, device, dtype):
    t, h = w["decode_batch"], m["hidden_size"]
    x, weight = randn(t, h, device=device, dtype=dtype), randn(h, device=device, dtype=dtype)
    ops = vllm_ops()

    def vllm():
        out = torch.empty_like(x)
        ops.rms_norm(out, x, weight, 1e-6)
        return out

    return Case(
        "rms_norm",
        f"T={t} H={h}",
        {"T": t, "H": h},
        lambda: load("rms_norm")(x, weight, 1e-6),
        lambda: ref.rms_norm(x, weight, 1e-6),
        2 * size(x) + size(weight),
        4 * t * h,
        tolerance_dtype=dtype,
        peers={
            "torch F.rms_norm": lambda: F.rms_norm(x, (h,), weight, 1e-6),
            **({"vLLM": vllm} if ops else {}),
        },
    )


CASES = {"rms_norm": (rms_norm,)}


def _backward(m, w, device, dtype):
    t, h = w["decode_batch"], m["hidden_size"]
    x = torch.empty(t, h, device=device, dtype=dtype, requires_grad=True)
    weight = torch.empty(h, device=device, dtype=dtype, requires_grad=True)
    load("rms_norm")(x, weight, 1e-6).backward(torch.empty(t, h, device=device, dtype=dtype))


def _with_residual(m, w, device, dtype):
    t, h = w["decode_batch"], m["hidden_size"]
    x, residual = (torch.empty(t, h, device=device, dtype=dtype) for _ in range(2))
    load("rms_norm")(x, torch.empty(h, device=device, dtype=dtype), 1e-6, residual=residual)


# Launches the case does not make that compile differently: the backward kernel (training),
# and the residual-add form vLLM's and SGLang's decoder layers call.
COMPILE_VARIANTS = {"rms_norm backward": _backward, "rms_norm with residual": _with_residual}
