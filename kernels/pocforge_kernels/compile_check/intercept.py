"""Stop Triton's launch path right after the compiler, for one target architecture.

Inside :func:`stopped_launches`, a kernel launch runs Triton's own ``JITFunction.run``
(specialisation, constexprs, options, the compile cache) up to the compiler, which
compiles for the session's target and hands back a stand-in that launches nothing.
Launch configs resolve for the target's arch through the session, case inputs are
left unfilled (:func:`..bench.case.unfilled_inputs`), and the device check of CPU
tensors is off, since nothing runs on any device.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from typing import TYPE_CHECKING

import torch
import triton
import triton.compiler
from triton.runtime.driver import driver

from .. import backend, config
from ..arch import ARCH_ENV
from ..bench.case import unfilled_inputs
from .targets import Target

if TYPE_CHECKING:
    from triton.backends.compiler import GPUTarget

    from .session import Session

REAL_COMPILE = triton.compiler.compile
_ACTIVE: Session | None = None
# Device numbers never repeat in a process: Triton keeps a cache per kernel and device, which
# must not hand one session's stand-ins to the next.
_DEVICE_NUMBERS = itertools.count(1)


class CompileOnlyDriver:
    """The part of a Triton driver ``JITFunction.run`` asks for before it compiles.

    Each target gets its own device number, so the per-device caches Triton keeps
    in every kernel never mix two architectures' binaries.
    """

    def __init__(self, target: GPUTarget, device: int):
        self.target, self.device = target, device

    def get_current_target(self) -> GPUTarget:
        return self.target

    def get_current_device(self) -> int:
        return self.device

    def get_current_stream(self, device=None) -> int:
        return 0


class NotLaunched:
    """Stands in for the compiled kernel at launch: nothing runs on any device.

    Integer tensors handed to the kernel are zeroed, because host code after a
    launch may index with a kernel's integer output (fused MoE sorts the expert
    ids routing wrote); zero keeps that in range.  Values mean nothing here.
    """

    function = packed_metadata = None

    def launch_metadata(self, *args):
        return None

    def run(self, *args):
        for arg in args:
            if isinstance(arg, torch.Tensor) and not arg.dtype.is_floating_point:
                arg.zero_()


def _compile_in_active_session(src, target=None, options=None, **kwargs):
    """What ``triton.compiler.compile`` is during a session.  Triton binds the compile
    function once per kernel and device, so this indirection, not a session's bound
    method, is what it keeps."""
    return _ACTIVE.compile(src, target=target, options=options, **kwargs)


@contextlib.contextmanager
def stopped_launches(session: Session, target: Target):
    """Launches compile for ``target`` into ``session`` and stop there; configs resolve for
    its arch through ``session.launch_config``."""
    global _ACTIVE
    saved = (triton.compiler.compile, config.launch_config)
    saved_arch, saved_driver = os.environ.get(ARCH_ENV), driver._active
    session.target = target
    _ACTIVE = session
    triton.compiler.compile = _compile_in_active_session
    config.launch_config = session.launch_config
    backend.CHECK_DEVICE = False
    os.environ[ARCH_ENV] = target.arch
    driver.set_active(CompileOnlyDriver(target.gpu_target(), next(_DEVICE_NUMBERS)))
    try:
        with unfilled_inputs():
            yield
    finally:
        driver._active, _ACTIVE = saved_driver, None
        triton.compiler.compile, config.launch_config = saved
        backend.CHECK_DEVICE = True
        if saved_arch is None:
            os.environ.pop(ARCH_ENV, None)
        else:
            os.environ[ARCH_ENV] = saved_arch
