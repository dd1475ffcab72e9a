"""Which implementation an op runs: its Triton kernel or its plain-torch reference.

One switch, read on every call so tests and users can flip it at run time::

    POCFORGE_KERNELS=reference   # every op runs its ref.py (the spec)
    POCFORGE_KERNELS=triton      # the default: every op runs its Triton kernel

The pattern is SGLang's fused-op design: the reference is the spec and stays
one environment variable away, so a wrong answer can be bisected to "kernel"
or "model" without editing code.
"""

from __future__ import annotations

import os

BACKEND_ENV = "POCFORGE_KERNELS"
BACKENDS = ("triton", "reference")

# Cleared only by the compile-only check (compile_check/intercept.py), whose launches stop
# after the compiler, so CPU tensors stand in for GPU ones there.
CHECK_DEVICE = True


def backend() -> str:
    """The backend named by ``POCFORGE_KERNELS`` (default ``triton``); unknown values raise."""
    value = os.environ.get(BACKEND_ENV, "triton").strip().lower() or "triton"
    if value not in BACKENDS:
        raise ValueError(f"{BACKEND_ENV}={value!r}: expected one of {', '.join(BACKENDS)}")
    return value


def use_reference() -> bool:
    """True when every op must run its plain-torch reference."""
    return backend() == "reference"


def interpreting() -> bool:
    """True under the Triton interpreter (``TRITON_INTERPRET=1``), where kernels run on CPU.

    The interpreter executes kernels with numpy, which has no fp8 types: launchers
    use this to hand fp8 operands over as fp32 and to do the final fp8 cast in torch.
    """
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


def check_device(*tensors) -> None:
    """Fail with a useful message when a Triton kernel cannot run on these tensors.

    Compiled Triton needs GPU tensors; CPU tensors work only under the interpreter.
    Failing here beats Triton's own error, which does not name the way out.
    """
    if not CHECK_DEVICE:
        return
    for t in tensors:
        if t is not None and t.device.type == "cpu" and not interpreting():
            raise RuntimeError(
                "pocforge_kernels: tensors are on the CPU but the Triton interpreter is off; "
                f"set TRITON_INTERPRET=1 before importing triton, or {BACKEND_ENV}=reference"
            )


def dot_flags(dtype) -> dict:
    """Compile-time flags for kernels that call ``tl.dot`` on operands of ``dtype``.

    ``UPCAST``: the interpreter's ``tl.dot`` is wrong for bf16 (numpy has no bf16),
    so tiles are converted to fp32 first there.  ``DOT_PRECISION``: fp32 inputs get
    an exact ("ieee") product rather than the backend's default (TF32 on NVIDIA);
    16-bit inputs get ``None``, the backend's default.  Naming "tf32" there would be
    ignored on most targets but refused by some (gfx950 accepts only ieee/bf16x3/
    bf16x6), which the compile check (:mod:`.compile_check`) caught.
    """
    import torch

    return {
        "UPCAST": interpreting(),
        "DOT_PRECISION": "ieee" if dtype == torch.float32 else None,
    }
