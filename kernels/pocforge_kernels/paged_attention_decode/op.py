"""Paged decode attention entry point: ``pocforge::paged_attention_decode``.

``q [B, Hq, D]``, ``k_cache, v_cache [num_blocks, block_size, Hkv, D]``,
``block_tables [B, max_blocks]`` int32, ``context_lens [B]`` int32 (each >= 1),
``max_context_len`` (sizes the grid without reading context_lens back),
``scale``.  Returns ``[B, Hq, D]`` in q's dtype.  ``partition_size`` overrides
the configured split-K partition (a multiple of the block size); contexts longer
than one partition take the split path plus the reduction pass.  The maths is in
:mod:`.ref`.  Launch configs: ``configs/<arch>.json`` keyed by max context length.
"""

from __future__ import annotations

import math

import torch
import triton

from .. import config
from ..backend import check_device, dot_flags, use_reference
from . import ref
from .kernel import paged_attention_decode_kernel, reduce_partitions_kernel

OP = "paged_attention_decode"
MIN_DOT_ROWS = 16  # tl.dot needs at least 16 rows; smaller GQA groups are padded


def paged_attention_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    max_context_len: int,
    scale: float | None = None,
    partition_size: int | None = None,
) -> torch.Tensor:
    """One query token per sequence against its paged keys and values."""
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    return torch.ops.pocforge.paged_attention_decode(
        q, k_cache, v_cache, block_tables, context_lens, max_context_len, scale, partition_size
    )


def num_partitions(max_context_len: int, partition_size: int) -> int:
    return triton.cdiv(max_context_len, partition_size)


def launch(
    q, k_cache, v_cache, block_tables, context_lens, max_context_len, scale, partition_size=None
):
    check_device(q, k_cache, v_cache, block_tables, context_lens)
    batch, hq, head_dim = q.shape
    _, block_size, hkv, _ = k_cache.shape
    if hq % hkv:
        raise ValueError(f"paged_attention_decode: {hq} query heads is not a multiple of {hkv}")
    cfg = config.launch_config(OP, max_context_len, device=q.device)
    partition = partition_size or cfg["PARTITION_SIZE"]
    if partition % block_size:
        raise ValueError(
            f"paged_attention_decode: partition {partition} is not a multiple of "
            f"the block size {block_size}"
        )
    parts = num_partitions(max_context_len, partition)
    split = parts > 1
    block_d = max(16, triton.next_power_of_2(head_dim))
    group = hq // hkv
    out = torch.empty_like(q)
    if batch == 0 or max_context_len == 0:
        return out
    if split:  # fp32 partials, written by every program, read by the reduction
        part_out = torch.empty((batch, hq, parts, block_d), dtype=torch.float32, device=q.device)
        part_max = torch.empty((batch, hq, parts), dtype=torch.float32, device=q.device)
        part_sum = torch.empty_like(part_max)
    else:
        part_out = part_max = part_sum = out  # unused; the constexpr branch is compiled out
    paged_attention_decode_kernel[(batch, hkv, parts)](
        q,
        k_cache,
        v_cache,
        block_tables,
        context_lens,
        out,
        part_out,
        part_max,
        part_sum,
        q.stride(0),
        q.stride(1),
        k_cache.stride(0),
        k_cache.stride(1),
        k_cache.stride(2),
        v_cache.stride(0),
        v_cache.stride(1),
        v_cache.stride(2),
        block_tables.stride(0),
        out.stride(0),
        out.stride(1),
        scale * math.log2(math.e),
        head_dim,
        group,
        parts,
        BLOCK_SIZE=block_size,
        PARTITION_SIZE=partition,
        BLOCK_G=max(MIN_DOT_ROWS, triton.next_power_of_2(group)),
        BLOCK_D=block_d,
        SPLIT=split,
        num_warps=cfg["num_warps"],
        **dot_flags(q.dtype),
    )
    if split:
        reduce_partitions(out, part_out, part_max, part_sum, context_lens, partition, block_d, cfg)
    return out


def reduce_partitions(out, part_out, part_max, part_sum, context_lens, partition, block_d, cfg):
    """Second pass of split-K decode: merge each partition's (max, sum, partial output) into
    ``out [batch, heads, D]`` (shared by paged attention and MLA decode)."""
    batch, heads, dim = out.shape
    parts = part_out.shape[2]
    reduce_partitions_kernel[(batch, heads)](
        out,
        part_out,
        part_max,
        part_sum,
        context_lens,
        out.stride(0),
        out.stride(1),
        heads,
        parts,
        dim,
        PARTITION_SIZE=partition,
        BLOCK_P=triton.next_power_of_2(parts),
        BLOCK_D=block_d,
        num_warps=cfg["num_warps_reduce"],
    )


@torch.library.custom_op("pocforge::paged_attention_decode", mutates_args=())
def _paged_attention_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    max_context_len: int,
    scale: float,
    partition_size: int | None,
) -> torch.Tensor:
    if use_reference():
        return ref.paged_attention_decode(q, k_cache, v_cache, block_tables, context_lens, scale)
    return launch(
        q, k_cache, v_cache, block_tables, context_lens, max_context_len, scale, partition_size
    )


@_paged_attention_decode.register_fake
def _(q, k_cache, v_cache, block_tables, context_lens, max_context_len, scale, partition_size):
    return torch.empty_like(q)
