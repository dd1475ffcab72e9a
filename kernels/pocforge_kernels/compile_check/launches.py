"""What the check compiles: every op's benchmark cases at the GPU workload's model shapes,
plus its compile variants (``<op>/bench.py``), and the kernels the library holds."""

from __future__ import annotations

import importlib
from collections.abc import Callable

import torch
from triton.runtime.jit import KernelInterface

from .. import op_folders
from ..bench.harness import load_models
from ..bench.registry import cases, compile_variants

# The compile variants run at one model's shapes: a dense GQA model every framework serves.
VARIANT_MODEL = "llama-3-8b"


def launches(ops: list[str] | None, dtype) -> dict[str, Callable[[], None]]:
    """Every launch to compile, by name ("rms_norm (llama-3-8b)", "rms_norm backward
    (llama-3-8b)"); each builds its inputs when called, inside the session."""
    spec = load_models()
    work, device = spec["workloads"]["gpu"], torch.device("cpu")
    calls = {}
    for op, builders in cases().items():
        if ops and op not in ops:
            continue
        for model in spec["ops"][op]:
            for build in builders:
                kind = f" {build.__name__.replace('_', '-')}" if len(builders) > 1 else ""
                calls[f"{op}{kind} ({model})"] = _deferred(
                    build, spec["models"][model], work, device, dtype
                )
    model = spec["models"][VARIANT_MODEL]
    for name, variant in compile_variants().items():
        if not ops or name.split()[0] in ops:
            calls[f"{name} ({VARIANT_MODEL})"] = _bound(variant, model, work, device, dtype)
    return calls


def _deferred(build, model, work, device, dtype):
    def call():
        case = build(model, work, device, dtype)
        if case is not None:  # None: the model has nothing of this builder's kind
            case.kernel()

    return call


def _bound(variant, model, work, device, dtype):
    def call():
        variant(model, work, device, dtype)

    return call


def library_kernels() -> set[str]:
    """Names of the ``@triton.jit`` kernels the library launches (``*_kernel`` in kernel.py)."""
    names = set()
    for folder in op_folders():
        module = importlib.import_module(f"pocforge_kernels.{folder}.kernel")
        for name, value in vars(module).items():
            if isinstance(value, KernelInterface) and name.endswith("_kernel"):
                names.add(name)
    return names
