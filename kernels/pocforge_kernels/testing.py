"""Numerical checks shared by the tests and the benchmark harness: one tolerance table.

The error measure is norm-wise relative error against a float64 reference,
``||out - ref||_2 / ||ref||_2``.  It is insensitive to elements near zero (where
element-wise relative error explodes) yet fails on any NaN, so a poisoned output
element that a kernel forgot to write fails the check.

Tolerances are a few units of the output type's rounding (``eps/2``): bf16 has
8 significant bits (eps 2**-7), fp16 11 (2**-10), fp32 24 (2**-23); fp8 e4m3
keeps 4 (2**-3).  Kernels accumulate in fp32, so the output rounding dominates.
"""

from __future__ import annotations

import torch

# Largest norm-wise relative error accepted, keyed by the dtype whose rounding bounds it.
TOLERANCES: dict[torch.dtype, float] = {
    torch.float64: 1e-10,
    torch.float32: 2e-5,
    torch.float16: 2e-3,
    torch.bfloat16: 1.6e-2,
    torch.float8_e4m3fn: 8e-2,
    torch.float8_e4m3fnuz: 8e-2,
}


def tolerance(dtype: torch.dtype) -> float:
    """The accepted relative error for results rounded to ``dtype``."""
    return TOLERANCES[dtype]


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """``||out - ref|| / ||ref||`` in float64; NaN when ``out`` has a NaN or Inf."""
    out64, ref64 = out.detach().to(torch.float64), ref.detach().to(torch.float64)
    if out64.shape != ref64.shape:
        raise AssertionError(f"shape {tuple(out64.shape)} != reference {tuple(ref64.shape)}")
    if not torch.isfinite(out64).all():
        return float("nan")
    scale = ref64.norm().item()
    diff = (out64 - ref64).norm().item()
    return diff / scale if scale > 0 else diff


def assert_close(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype, what: str = "") -> None:
    """Raise when ``out`` is not within the tolerance of ``dtype`` of ``ref``."""
    err = relative_error(out, ref)
    tol = tolerance(dtype)
    if not err <= tol:  # also catches NaN
        label = f"{what}: " if what else ""
        raise AssertionError(f"{label}relative error {err:.3g} > {tol:.3g} ({dtype})")
