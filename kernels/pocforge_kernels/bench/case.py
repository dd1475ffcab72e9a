"""What a benchmark case is, and the helpers the ops' ``bench.py`` files share.

Each op folder's ``bench.py`` builds its cases (``CASES``: spec op name -> case
builders) at one model's shapes; a builder is ``(model, workload, device, dtype)
-> Case``, or None where the model has nothing of that kind.  ``nbytes`` counts
each tensor the op must read or write once (the minimum HBM traffic); ``flops``
counts multiply-adds as two.  Both define the roofline numbers, so they are
written out per op rather than measured.  ``peers`` are other implementations
of the same op that are available on the machine, each timed in the same run:
vLLM's kernel when vLLM is installed, and PyTorch's own fused op where one
exists (SDPA for prefill attention, ``torch._scaled_mm`` for the fp8 GEMM,
``F.rms_norm``), so a GPU without vLLM still has a peer to beat.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

import torch


@dataclass
class Case:
    op: str  # the spec's op name (pocforge.spec.kernels_schema.KERNEL_OPS)
    shape: str  # for people: "T=64 H=4096"
    dims: dict[str, int]  # for programs: {"T": 64, "H": 4096}
    kernel: Callable[[], object]
    reference: Callable[[], object]
    nbytes: float
    flops: float
    precision: str = "bf16"  # which compute peak applies: "bf16" or "fp8"
    tolerance_dtype: torch.dtype = torch.bfloat16
    peers: dict[str, Callable[[], object]] = field(default_factory=dict)


Builder = Callable[[dict, dict, torch.device, torch.dtype], Case | None]

_unfilled = False


@contextlib.contextmanager
def unfilled_inputs():
    """While active, :func:`randn` hands out ``torch.empty``: the compile check never reads
    its inputs, and never touching their pages keeps DeepSeek-V3's 22 GB of expert weights
    free there."""
    global _unfilled
    saved, _unfilled = _unfilled, True
    try:
        yield
    finally:
        _unfilled = saved


def randn(*shape, device, dtype=None, scale: float = 1.0) -> torch.Tensor:
    """Standard-normal input times ``scale``; every case input comes from here (see
    :func:`unfilled_inputs`)."""
    if _unfilled:
        return torch.empty(*shape, device=device, dtype=dtype)
    t = torch.randn(*shape, device=device, dtype=dtype)
    return t.mul_(scale) if scale != 1.0 else t


def size(*tensors) -> int:
    """Bytes of ``tensors``, each counted once."""
    return sum(t.numel() * t.element_size() for t in tensors)


def vllm_ops():
    """vLLM's ``_custom_ops`` module when vLLM is installed, else None."""
    try:
        from vllm import _custom_ops
    except Exception:  # not installed, or built for another device
        return None
    return _custom_ops


def paged_cache(batch, context, block_size, width, device, dtype):
    """A paged KV cache ``[blocks, block_size, *width]`` with shuffled block tables and every
    sequence ``context`` tokens long: ``(cache, block_tables [batch, blocks], lens [batch])``."""
    blocks_per_seq = -(-context // block_size)
    cache = randn(batch * blocks_per_seq, block_size, *width, device=device, dtype=dtype)
    tables = torch.randperm(batch * blocks_per_seq, device=device).view(batch, -1).to(torch.int32)
    lens = torch.full((batch,), context, device=device, dtype=torch.int32)
    return cache, tables, lens
