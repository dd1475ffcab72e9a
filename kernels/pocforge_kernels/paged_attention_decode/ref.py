"""Paged decode attention in plain torch: the spec of the Triton kernels.

vLLM's PagedAttention (Kwon et al. 2023, "Efficient Memory Management for Large
Language Model Serving with PagedAttention"): a sequence's keys and values live
in fixed-size blocks scattered through a cache, and ``block_tables[b, i]`` names
the cache block that holds tokens ``i * block_size ... (i + 1) * block_size - 1``
of sequence ``b``.  Each sequence has one new query token::

    K_b = [k_cache[block_tables[b, t // bs], t % bs] for t < context_lens[b]]
    O_b,h = softmax(scale * q_b,h @ K_b,h//g .T) @ V_b,h//g

Shapes: ``q [B, Hq, D]``, ``k_cache, v_cache [num_blocks, block_size, Hkv, D]``
(the layout of vLLM's FlashAttention backend), ``block_tables [B, max_blocks]``
int32, ``context_lens [B]`` int32 (each >= 1), output ``[B, Hq, D]`` in q's dtype.
"""

from __future__ import annotations

import torch


def gather_sequence(cache: torch.Tensor, block_table: torch.Tensor, length: int) -> torch.Tensor:
    """The first ``length`` token entries of one sequence: ``[length, *cache.shape[2:]]``."""
    block_size = cache.shape[1]
    tokens = torch.arange(length, device=cache.device)
    blocks = block_table[tokens // block_size].long()
    return cache[blocks, tokens % block_size]


def paged_attention_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    ct = torch.promote_types(q.dtype, torch.float32)
    group = q.shape[1] // k_cache.shape[2]
    out = torch.empty_like(q)
    for b, length in enumerate(context_lens.tolist()):
        keys = gather_sequence(k_cache, block_tables[b], length).to(ct)  # [L, Hkv, D]
        values = gather_sequence(v_cache, block_tables[b], length).to(ct)
        keys = keys.repeat_interleave(group, dim=1).transpose(0, 1)  # [Hq, L, D]
        values = values.repeat_interleave(group, dim=1).transpose(0, 1)
        scores = scale * (keys @ q[b].to(ct)[:, :, None])[..., 0]  # [Hq, L]
        out[b] = (scores.softmax(-1)[:, None, :] @ values)[:, 0].to(q.dtype)
    return out
