"""Sort (token, expert) pairs by expert and pad each expert's run to the GEMM's row block.

The data movement of vLLM's ``moe_align_block_size``, written with torch ops so
it runs on any device (a handful of small kernels; the GEMMs dominate).  Sizes
are worst-case bounds, never read back from the device, so nothing here waits
for the GPU and ``torch.compile`` sees static shapes.
"""

from __future__ import annotations

import torch


def max_padded_pairs(num_pairs: int, num_experts: int, block_m: int) -> int:
    """Upper bound of the padded length: every expert may waste ``block_m - 1`` slots."""
    bound = num_pairs + num_experts * (block_m - 1)
    return -(-bound // block_m) * block_m


def align_block_size(
    topk_ids: torch.Tensor, num_experts: int, block_m: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(sorted_ids [P], expert_ids [P // block_m])`` for ``topk_ids [T, k]``.

    ``sorted_ids`` lists pair indices ``t * k + j`` grouped by expert (in token
    order within an expert), each group padded with the sentinel ``T * k`` to a
    multiple of ``block_m``; ``expert_ids[b]`` is the expert of row block ``b``,
    or -1 for blocks past the padded total.
    """
    flat = topk_ids.reshape(-1).long()
    num_pairs = flat.numel()
    total = max_padded_pairs(num_pairs, num_experts, block_m)
    device = topk_ids.device

    counts = torch.bincount(flat, minlength=num_experts)
    padded = (counts + block_m - 1) // block_m * block_m
    padded_end = padded.cumsum(0)
    padded_start = padded_end - padded

    order = torch.argsort(flat, stable=True)
    experts_sorted = flat[order]
    run_start = counts.cumsum(0) - counts  # where each expert's run begins in `order`
    rank = torch.arange(num_pairs, device=device) - run_start[experts_sorted]
    sorted_ids = torch.full((total,), num_pairs, dtype=torch.int32, device=device)
    sorted_ids[padded_start[experts_sorted] + rank] = order.to(torch.int32)

    block_starts = torch.arange(0, total, block_m, device=device)
    expert_ids = torch.searchsorted(padded_end, block_starts, right=True)
    expert_ids = torch.where(expert_ids < num_experts, expert_ids, -1).to(torch.int32)
    return sorted_ids, expert_ids
