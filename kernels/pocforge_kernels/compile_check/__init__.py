"""Compile every kernel the kit launches for real GPU targets, on any machine, GPU or not.

Triton needs no GPU to compile: its front end, LLVM, the ``ptxas`` that ships
in the wheel (CUDA) and the linker built into it (ROCm) turn a kernel into the
same cubin or hsaco a GPU would load.  What needs the GPU is only the launch.
The check runs every op's benchmark cases (``<op>/bench.py``, at the GPU
workload's model shapes) and its compile variants with Triton's launch path
intact up to the compiler and stopped right after it (:mod:`.intercept`), once
per target architecture (:mod:`.targets`), so each kernel is compiled with
exactly the constexprs, dtypes, ``num_warps`` and ``num_stages`` its launcher
picks for that architecture from ``configs/<arch>.json``.  Every bucket of
every config file is compiled, not only the one the benchmark shape selects
(:mod:`.session`).

What it checks, which the CPU interpreter cannot:

* the kernel compiles for the target (types, layouts, ``tl.dot`` shapes and
  fp8 formats the interpreter accepts but a backend refuses);
* its shared memory (LDS on AMD) fits one program's limit on that target;
  over the limit, the launch would fail with "out of resource";
* registers do not spill (reported, not failed: a spill is slow, not wrong),
  read from the compiler's own output (:mod:`.inspect`);
* every ``@triton.jit`` kernel of the library is compiled at least once.

It says nothing about speed.  Run ``python -m pocforge_kernels.compile_check``
(or ``pocforge kernels compile``) without ``TRITON_INTERPRET`` (the interpreter
replaces the compiler).  Importing this package does not import torch or triton.
"""

from __future__ import annotations


def compile_all(*args, **kwargs) -> dict:
    """See :func:`.run.compile_all`."""
    from .run import compile_all as run

    return run(*args, **kwargs)


__all__ = ["compile_all"]
