"""Megatron-Core on a CPU: the few places where megatron-core 0.16.1 assumes CUDA, pointed
at the CPU for the kit's CPU driver.

Only ``pocforge.training.megatron_driver`` loads this, and only with
``--distributed-backend gloo`` (a ``cpu`` cluster); a GPU node runs Megatron-LM's own
``pretrain_gpt.py`` and never imports it. Each shim names what it replaces:

- ``torch.cuda.current_device`` (tensor and pipeline parallel buffers are allocated on it)
  returns ``"cpu"``; ``torch.cuda.synchronize`` does nothing;
- the pipeline schedules build ``torch.zeros(..., device="cuda")`` token counters: their
  module sees a ``torch`` whose ``zeros`` maps that device to the CPU;
- the RNG tracker is seeded with ``inference_rng_tracker=True`` (the CUDA RNG tracker
  would call ``torch.cuda.get_rng_state``): :func:`seed`.
"""

from __future__ import annotations

import types

import torch

MEGATRON_CORE = "0.16.1"  # the version these shims were written against


class _CpuZerosTorch(types.ModuleType):
    """``torch`` as the pipeline schedules see it: ``zeros(device="cuda")`` lands on the CPU."""

    def __getattr__(self, name):
        return getattr(torch, name)

    @staticmethod
    def zeros(*args, **kwargs):
        if str(kwargs.get("device", "")).startswith("cuda"):
            kwargs["device"] = "cpu"
        return torch.zeros(*args, **kwargs)


def install() -> None:
    """Apply the shims; refuses another megatron-core than the one they were written for."""
    import megatron.core
    from megatron.core.pipeline_parallel import schedules

    if megatron.core.__version__ != MEGATRON_CORE:
        raise RuntimeError(
            f"the CPU shims are written for megatron-core {MEGATRON_CORE}, "
            f"found {megatron.core.__version__}; pin it (requirements/cpu-nodeps.txt)"
        )
    torch.cuda.current_device = lambda: "cpu"  # type: ignore[assignment]
    torch.cuda.synchronize = lambda *args, **kwargs: None  # type: ignore[assignment]
    schedules.torch = _CpuZerosTorch("torch")


def seed(value: int) -> None:
    from megatron.core import tensor_parallel

    tensor_parallel.model_parallel_cuda_manual_seed(value, inference_rng_tracker=True)
