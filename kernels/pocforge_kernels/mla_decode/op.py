"""MLA decode entry point: ``pocforge::mla_decode``.

``q [B, H, R + P]`` (absorbed query: ``W_UK``-projected nope part, then the rope
part), ``kv_cache [num_blocks, block_size, R + P]`` (latent then rope key),
``block_tables [B, max_blocks]`` int32, ``context_lens [B]`` int32 (each >= 1),
``max_context_len``, ``scale``, ``kv_lora_rank`` R (512 in DeepSeek-V2/V3; the
rope width P = 64 follows from the cache).  Returns the latent output
``[B, H, R]``; multiply by ``W_UV`` (:func:`.ref.project_output`) for the heads'
values.  R and P must be powers of two (512 and 64 are).  Launch configs:
``configs/<arch>.json`` keyed by max context length.
"""

from __future__ import annotations

import math

import torch
import triton

from .. import config
from ..backend import check_device, dot_flags, use_reference
from ..paged_attention_decode.op import reduce_partitions
from . import ref
from .kernel import mla_decode_kernel

OP = "mla_decode"


def mla_decode(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    max_context_len: int,
    scale: float,
    kv_lora_rank: int = 512,
    partition_size: int | None = None,
) -> torch.Tensor:
    """Latent-space attention output ``[B, H, kv_lora_rank]``."""
    return torch.ops.pocforge.mla_decode(
        q,
        kv_cache,
        block_tables,
        context_lens,
        max_context_len,
        scale,
        kv_lora_rank,
        partition_size,
    )


def launch(
    q,
    kv_cache,
    block_tables,
    context_lens,
    max_context_len,
    scale,
    kv_lora_rank,
    partition_size=None,
):
    check_device(q, kv_cache, block_tables, context_lens)
    batch, heads, width = q.shape
    block_size = kv_cache.shape[1]
    rope = width - kv_lora_rank
    if kv_cache.shape[2] != width or kv_cache.stride(-1) != 1 or q.stride(-1) != 1:
        raise ValueError(
            f"mla_decode: q {tuple(q.shape)} and kv_cache {tuple(kv_cache.shape)} "
            "must share a contiguous last dimension"
        )
    for name, size in (("kv_lora_rank", kv_lora_rank), ("rope width", rope)):
        if size < 16 or size & (size - 1):
            raise ValueError(f"mla_decode: {name} {size} must be a power of two >= 16")
    cfg = config.launch_config(OP, max_context_len, device=q.device)
    partition = partition_size or cfg["PARTITION_SIZE"]
    if partition % block_size:
        raise ValueError(
            f"mla_decode: partition {partition} is not a multiple of the block size {block_size}"
        )
    parts = triton.cdiv(max_context_len, partition)
    split = parts > 1
    out = q.new_empty((batch, heads, kv_lora_rank))
    if batch == 0 or max_context_len == 0:
        return out
    if split:
        part_out = torch.empty(
            (batch, heads, parts, kv_lora_rank), dtype=torch.float32, device=q.device
        )
        part_max = torch.empty((batch, heads, parts), dtype=torch.float32, device=q.device)
        part_sum = torch.empty_like(part_max)
    else:
        part_out = part_max = part_sum = out  # unused; the constexpr branch is compiled out
    grid = (batch, triton.cdiv(heads, cfg["BLOCK_H"]), parts)
    mla_decode_kernel[grid](
        q,
        kv_cache,
        block_tables,
        context_lens,
        out,
        part_out,
        part_max,
        part_sum,
        q.stride(0),
        q.stride(1),
        kv_cache.stride(0),
        kv_cache.stride(1),
        block_tables.stride(0),
        out.stride(0),
        out.stride(1),
        scale * math.log2(math.e),
        heads,
        parts,
        RANK=kv_lora_rank,
        ROPE=rope,
        BLOCK_SIZE=block_size,
        PARTITION_SIZE=partition,
        BLOCK_H=cfg["BLOCK_H"],
        SPLIT=split,
        num_warps=cfg["num_warps"],
        num_stages=cfg["num_stages"],
        **dot_flags(q.dtype),
    )
    if split:
        reduce_partitions(
            out, part_out, part_max, part_sum, context_lens, partition, kv_lora_rank, cfg
        )
    return out


@torch.library.custom_op("pocforge::mla_decode", mutates_args=())
def _mla_decode(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    max_context_len: int,
    scale: float,
    kv_lora_rank: int,
    partition_size: int | None,
) -> torch.Tensor:
    if use_reference():
        return ref.mla_decode(q, kv_cache, block_tables, context_lens, scale, kv_lora_rank)
    return launch(
        q,
        kv_cache,
        block_tables,
        context_lens,
        max_context_len,
        scale,
        kv_lora_rank,
        partition_size,
    )


@_mla_decode.register_fake
def _(
    q, kv_cache, block_tables, context_lens, max_context_len, scale, kv_lora_rank, partition_size
):
    return q.new_empty((q.shape[0], q.shape[1], kv_lora_rank))
