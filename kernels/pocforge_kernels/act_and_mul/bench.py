"""The gated activations' benchmark cases, SiLU (SwiGLU) and GELU (GeGLU), and the variants the
compile check adds (see :mod:`..bench.case`).

GELU runs the form the model's config names: Gemma's ``gelu_pytorch_tanh`` is the tanh
approximation, anything else the exact erf form.
"""

from __future__ import annotations

import torch

from .. import load
from ..bench.case import Case, randn, size, vllm_ops
from . import ref


def silu_and_mul(m, w, device, dtype):
    t, i = w["decode_batch"], m["intermediate_size"]
    x = randn(t, 2 * i, device=device, dtype=dtype)

    def vllm():
        out = torch.empty(t, i, device=device, dtype=dtype)
        torch.ops._C.silu_and_mul(out, x)
        return out

    return Case(
        "silu_and_mul",
        f"T={t} I={i}",
        {"T": t, "I": i},
        lambda: load("silu_and_mul")(x),
        lambda: ref.silu_and_mul(x),
        size(x) * 3 // 2,
        5 * t * i,
        tolerance_dtype=dtype,
        peers={"vLLM": vllm} if vllm_ops() else {},
    )


def gelu_and_mul(m, w, device, dtype):
    t, i = w["decode_batch"], m["intermediate_size"]
    tanh = m.get("hidden_activation") == "gelu_pytorch_tanh"
    approximate = "tanh" if tanh else "none"
    x = randn(t, 2 * i, device=device, dtype=dtype)

    def vllm():  # vLLM keeps one op per form
        out = torch.empty(t, i, device=device, dtype=dtype)
        (torch.ops._C.gelu_tanh_and_mul if tanh else torch.ops._C.gelu_and_mul)(out, x)
        return out

    return Case(
        "gelu_and_mul",
        f"T={t} I={i} {'tanh' if tanh else 'erf'}",
        {"T": t, "I": i},
        lambda: load("gelu_and_mul")(x, approximate=approximate),
        lambda: ref.gelu_and_mul(x, approximate=approximate),
        size(x) * 3 // 2,
        # The tanh form: cube, two scalings, add, tanh, add, two products, times up; erf:
        # scale, erf, add, two products, times up.  A transcendental counts as one.
        (10 if tanh else 6) * t * i,
        tolerance_dtype=dtype,
        peers={"vLLM": vllm} if vllm_ops() else {},
    )


CASES = {"silu_and_mul": (silu_and_mul,), "gelu_and_mul": (gelu_and_mul,)}


def _forward_and_backward(name, **kwargs):
    def call(m, w, device, dtype):
        t, i = w["decode_batch"], m["intermediate_size"]
        x = torch.empty(t, 2 * i, device=device, dtype=dtype, requires_grad=True)
        load(name)(x, **kwargs).backward(torch.empty(t, i, device=device, dtype=dtype))

    return call


# The backward kernel (training), and GELU in both forms whichever one its case runs.
COMPILE_VARIANTS = {
    "silu_and_mul backward": _forward_and_backward("silu_and_mul"),
    "gelu_and_mul fwd+bwd": _forward_and_backward("gelu_and_mul"),
    "gelu_and_mul tanh fwd+bwd": _forward_and_backward("gelu_and_mul", approximate="tanh"),
}
