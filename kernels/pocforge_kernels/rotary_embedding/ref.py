"""Rotary position embedding in plain torch: the spec of the Triton kernel.

RoFormer (Su et al. 2021, "RoFormer: Enhanced Transformer with Rotary Position
Embedding"): pairs of features ``(x1, x2)`` of every head are rotated by the
angle ``pos * theta_i``::

    x1' = x1 * cos - x2 * sin
    x2' = x2 * cos + x1 * sin

Which features pair up is the style: **NeoX** pairs ``i`` with ``i + rot/2``
(halves, as in GPT-NeoX and Llama), **GPT-J** pairs ``2i`` with ``2i + 1``
(interleaved).  Only the first ``rot_dim`` features of a head rotate (partial
rotary); the rest pass through.

Layout as in vLLM's ``rotary_embedding`` op: ``positions [T]``,
``query [T, Hq * D]`` (or ``[T, Hq, D]``), ``key [T, Hk * D]`` or None,
``cos_sin_cache [max_position, rot_dim]`` holding ``cos`` in its first half and
``sin`` in its second.  query and key are modified in place.
"""

from __future__ import annotations

import torch


def build_cos_sin_cache(
    max_position: int, rot_dim: int, base: float = 10000.0, dtype=torch.float32, device=None
) -> torch.Tensor:
    """The standard cache ``[max_position, rot_dim]``: ``theta_i = base ** (-2i / rot_dim)``."""
    inv_freq = base ** (-torch.arange(0, rot_dim, 2, dtype=torch.float64, device=device) / rot_dim)
    angles = torch.arange(max_position, dtype=torch.float64, device=device)[:, None] * inv_freq
    return torch.cat([angles.cos(), angles.sin()], dim=-1).to(dtype)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, is_neox: bool) -> torch.Tensor:
    """Rotate ``x [T, H, rot]`` by ``cos, sin [T, 1, rot/2]``."""
    half = x.shape[-1] // 2
    if is_neox:
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).flatten(-2)


def rotary_embedding(
    positions: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor | None,
    head_size: int,
    cos_sin_cache: torch.Tensor,
    is_neox: bool,
) -> None:
    """Rotate ``query`` and ``key`` in place (see the module docstring for the layout)."""
    rot_dim = cos_sin_cache.shape[-1]
    ct = torch.promote_types(query.dtype, torch.float32)
    cos, sin = cos_sin_cache[positions.reshape(-1)].to(ct).chunk(2, dim=-1)
    cos, sin = cos[:, None, :], sin[:, None, :]
    for x in (query, key):
        if x is None:
            continue
        heads = x.view(positions.numel(), -1, head_size)
        rotated = _rotate(heads[..., :rot_dim].to(ct), cos, sin, is_neox)
        heads[..., :rot_dim] = rotated.to(x.dtype)
