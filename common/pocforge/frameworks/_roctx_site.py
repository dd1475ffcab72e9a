"""Copied as ``sitecustomize.py`` into a folder first on ``PYTHONPATH`` of a launch that runs
under ``rocprofv3 --selected-regions`` (:mod:`pocforge.frameworks.gpu_profiler`), in every
Python process of it: the server, its workers, the training ranks.

On ROCm ``torch.cuda.profiler.start()`` and ``torch.cuda.cudart().cudaProfilerStart()``
reach HIP's ``hipProfilerStart``, a stub (``hipErrorNotSupported``): the frameworks' CUDA
profiler switch would gate nothing. Once ``torch.cuda`` is imported, this makes both call
``roctxProfilerResume(0)``, and their stops ``roctxProfilerPause(0)``, which rocprofv3
follows. Standard library only; it never imports torch itself, and a process that never
imports it is left as it was. The ``sitecustomize`` it shadows (a patch overlay's, the
image's) runs after it (``_site_chain.py``, appended to this file).
"""

from __future__ import annotations

import ctypes
import importlib.abc
import importlib.machinery
import os
import sys

# librocprofiler-sdk-roctx (ROCm 6.2+), else the older roctracer's libroctx64
LIBRARIES = ("librocprofiler-sdk-roctx.so.1", "librocprofiler-sdk-roctx.so", "libroctx64.so")
_roctx = None


def _library():
    global _roctx
    if _roctx is None:
        tried = []
        for name in [os.environ.get("POCFORGE_ROCTX_LIBRARY"), *LIBRARIES]:
            if not name:
                continue
            try:
                lib = ctypes.CDLL(name)
            except OSError as exc:
                tried.append(f"{name}: {exc}")
                continue
            for symbol in ("roctxProfilerResume", "roctxProfilerPause"):
                getattr(lib, symbol).argtypes = [ctypes.c_uint64]
                getattr(lib, symbol).restype = ctypes.c_int
            _roctx = lib
            break
        else:
            raise RuntimeError(
                "pocforge: rocprofv3's gate found no ROCTx library ("
                + "; ".join(tried)
                + "): install rocprofiler-sdk-roctx in the runtime, or set POCFORGE_ROCTX_LIBRARY"
            )
    return _roctx


def resume() -> int:
    """Start recording (rocprofv3 ``--selected-regions``): every thread of this process."""
    return _library().roctxProfilerResume(0)


def pause() -> int:
    return _library().roctxProfilerPause(0)


class _Cudart:
    """``torch.cuda.cudart()`` with its profiler calls sent to ROCTx; the rest is the real
    one's, looked up when asked for."""

    def __init__(self, real):
        self._real = real  # torch's own cudart()

    def cudaProfilerStart(self):  # noqa: N802 - the CUDA runtime's name
        return resume()

    def cudaProfilerStop(self):  # noqa: N802
        return pause()

    def __getattr__(self, name):
        return getattr(self._real(), name)


def _patch(cuda) -> None:
    real = cuda.cudart

    def cudart():
        return _Cudart(real)

    cuda.cudart = cudart
    profiler = sys.modules.get("torch.cuda.profiler")
    if profiler is None:
        import torch.cuda.profiler as profiler
    profiler.start = resume
    profiler.stop = pause


class _PatchingLoader(importlib.abc.Loader):
    """``torch.cuda``'s own loader, then the patch once the module has run."""

    def __init__(self, real):
        self._real = real

    def create_module(self, spec):
        return self._real.create_module(spec)

    def exec_module(self, module):
        self._real.exec_module(module)
        _patch(module)


class _AfterTorchCuda(importlib.abc.MetaPathFinder):
    """Finds ``torch.cuda`` as the path finder does, with :class:`_PatchingLoader`."""

    def find_spec(self, name, path, target=None):
        if name != "torch.cuda":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _PatchingLoader(spec.loader)
        return spec


sys.meta_path.insert(0, _AfterTorchCuda())
