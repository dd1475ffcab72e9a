"""Every op's benchmark cases and compile variants, found in the op folders' ``bench.py``.

An op folder (:func:`pocforge_kernels.op_folders`) may carry a ``bench.py`` with

* ``CASES``: spec op name -> case builders (:data:`.case.Builder`), each called once
  per model the op runs at (``models.json``);
* ``COMPILE_VARIANTS`` (optional): name -> ``(model, workload, device, dtype)``, a
  launch the cases do not make that compiles differently (a backward kernel, another
  flag); the name starts with its op.  Only the compile check runs them.

Importing an op's ``bench.py`` imports the op, so call these after ``TRITON_INTERPRET``
is settled.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from importlib import import_module
from pathlib import Path

from .. import op_folders
from .case import Builder

ROOT = Path(__file__).resolve().parent.parent


@cache
def _modules() -> tuple:
    return tuple(
        import_module(f"pocforge_kernels.{folder}.bench")
        for folder in op_folders()
        if (ROOT / folder / "bench.py").is_file()
    )


def cases() -> dict[str, tuple[Builder, ...]]:
    """Op name -> its case builders, in :data:`pocforge_kernels.OPS` order."""
    found: dict[str, tuple[Builder, ...]] = {}
    for module in _modules():
        for op, builders in module.CASES.items():
            if op in found:
                raise ValueError(f"{module.__name__}: op {op!r} has cases in two folders")
            found[op] = tuple(builders)
    return found


def compile_variants() -> dict[str, Callable]:
    """Variant name ("rms_norm backward") -> its launch, for the compile check."""
    found: dict[str, Callable] = {}
    for module in _modules():
        for name, call in getattr(module, "COMPILE_VARIANTS", {}).items():
            if name.split()[0] not in module.CASES:
                raise ValueError(f"{module.__name__}: variant {name!r} names no op of its CASES")
            found[name] = call
    return found
