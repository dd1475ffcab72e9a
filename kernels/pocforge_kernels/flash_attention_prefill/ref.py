"""Prefill attention in plain torch: the spec of the FlashAttention kernel.

For each packed sequence ``s`` (tokens ``cu_seqlens[s] : cu_seqlens[s+1]``) and
query head ``h``, with ``g = Hq / Hkv`` query heads per key/value head (GQA,
Ainslie et al. 2023)::

    S = scale * Q_h @ K_{h // g}.T              [L, L]
    S[i, j] = -inf  where j > i                 (causal)
    O_h = softmax(S, -1) @ V_{h // g}           [L, D]

Shapes: ``q [T, Hq, D]``, ``k, v [T, Hkv, D]``, ``cu_seqlens [B + 1]`` (int32,
starting at 0 and ending at T), output ``[T, Hq, D]`` in q's dtype.  Sequences
never attend across their boundaries.
"""

from __future__ import annotations

import torch


def flash_attention_prefill(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens: torch.Tensor,
    scale: float,
    causal: bool = True,
) -> torch.Tensor:
    ct = torch.promote_types(q.dtype, torch.float32)
    group = q.shape[1] // k.shape[1]
    out = torch.empty_like(q)
    bounds = cu_seqlens.tolist()
    for start, end in zip(bounds[:-1], bounds[1:], strict=True):
        qs = q[start:end].to(ct).transpose(0, 1)  # [Hq, L, D]
        ks = k[start:end].to(ct).repeat_interleave(group, dim=1).transpose(0, 1)
        vs = v[start:end].to(ct).repeat_interleave(group, dim=1).transpose(0, 1)
        scores = scale * qs @ ks.transpose(1, 2)
        if causal:
            length = end - start
            future = torch.ones(length, length, dtype=torch.bool, device=q.device).triu(1)
            scores = scores.masked_fill(future, float("-inf"))
        out[start:end] = (scores.softmax(-1) @ vs).transpose(0, 1).to(q.dtype)
    return out
