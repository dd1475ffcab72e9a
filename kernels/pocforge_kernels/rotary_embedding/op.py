"""Rotary embedding entry point: ``pocforge::rotary_embedding`` (in place on query and key).

Same signature as vLLM's ``rotary_embedding``: ``positions [T]``, ``query``
``[T, Hq * D]`` or ``[T, Hq, D]`` (the token stride may be wider, e.g. a slice of
a fused qkv tensor), ``key`` likewise or None, ``head_size D``,
``cos_sin_cache [max_position, rot_dim]`` (cos | sin), ``is_neox``.  The maths
and styles are in :mod:`.ref`.  Launch configs: ``configs/<arch>.json`` keyed by
the number of heads.
"""

from __future__ import annotations

import torch
import triton

from .. import config
from ..backend import check_device, use_reference
from . import ref
from .kernel import rotary_embedding_kernel

OP = "rotary_embedding"


def rotary_embedding(
    positions: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor | None,
    head_size: int,
    cos_sin_cache: torch.Tensor,
    is_neox: bool = True,
) -> None:
    """Rotate ``query`` and ``key`` in place by the angles of ``positions``."""
    torch.ops.pocforge.rotary_embedding(positions, query, key, head_size, cos_sin_cache, is_neox)


def _heads_view(x: torch.Tensor, n_tokens: int, head_size: int) -> torch.Tensor:
    """``x`` as ``[T, H, D]`` without copying (the kernel writes in place)."""
    heads = x.view(n_tokens, -1, head_size)
    if heads.stride(-1) != 1:
        raise ValueError("rotary_embedding: the head dimension must be contiguous")
    return heads


def launch(positions, query, key, head_size, cos_sin_cache, is_neox) -> None:
    check_device(positions, query, key, cos_sin_cache)
    n_tokens = positions.numel()
    rot_dim = cos_sin_cache.shape[-1]
    if rot_dim % 2 or rot_dim > head_size:
        raise ValueError(f"rotary_embedding: rot_dim {rot_dim} must be even and <= {head_size}")
    if n_tokens == 0:
        return
    q = _heads_view(query, n_tokens, head_size)
    k = _heads_view(key, n_tokens, head_size) if key is not None else q
    cache = cos_sin_cache if cos_sin_cache.stride(-1) == 1 else cos_sin_cache.contiguous()
    cfg = config.launch_config(
        OP, q.shape[1] + (k.shape[1] if key is not None else 0), device=query.device
    )
    half = rot_dim // 2
    rotary_embedding_kernel[(n_tokens,)](
        positions.reshape(-1),
        q,
        k,
        cache,
        q.stride(0),
        q.stride(1),
        k.stride(0),
        k.stride(1),
        cache.stride(0),
        q.shape[1],
        k.shape[1] if key is not None else 0,
        half,
        IS_NEOX=is_neox,
        HAS_KEY=key is not None,
        BLOCK_H=cfg["BLOCK_H"],
        BLOCK_HALF=triton.next_power_of_2(half),
        num_warps=cfg["num_warps"],
    )


@torch.library.custom_op("pocforge::rotary_embedding", mutates_args=("query", "key"))
def _rotary_embedding(
    positions: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor | None,
    head_size: int,
    cos_sin_cache: torch.Tensor,
    is_neox: bool,
) -> None:
    if use_reference():
        ref.rotary_embedding(positions, query, key, head_size, cos_sin_cache, is_neox)
    else:
        launch(positions, query, key, head_size, cos_sin_cache, is_neox)


@_rotary_embedding.register_fake
def _(positions, query, key, head_size, cos_sin_cache, is_neox):
    return None
