"""Mixture-of-experts MLP in plain torch: the spec of the fused kernels.

Routing (Shazeer et al. 2017; Mixtral, Jiang et al. 2024, eq. 1-2)::

    p = softmax(router_logits)              [T, E]
    w, ids = topk(p, k)                     [T, k]
    w = w / sum(w)                          (when renormalize; Mixtral does, Qwen-MoE does not)

Experts are gated MLPs with the gate and up projections stacked (vLLM's ``w13``)::

    h_e(x) = w2[e] @ (silu(x @ w13[e, :I].T) * (x @ w13[e, I:].T)).T
    y_t    = sum_j w[t, j] * h_{ids[t, j]}(x_t)

Shapes: ``hidden [T, H]``, ``w13 [E, 2I, H]``, ``w2 [E, H, I]``,
``router_logits [T, E]``; routing weights fp32, ids int32; output ``[T, H]`` in
hidden's dtype.  A shared expert (DeepSeek-V3) is an ordinary MLP added outside.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def topk_softmax(
    router_logits: torch.Tensor, top_k: int, renormalize: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(weights [T, k] fp32, ids [T, k] int32)``, largest weight first."""
    ct = torch.promote_types(router_logits.dtype, torch.float32)
    weights, ids = router_logits.to(ct).softmax(-1).topk(top_k, dim=-1)
    if renormalize:
        weights = weights / weights.sum(-1, keepdim=True)
    return weights.to(torch.float32), ids.to(torch.int32)


def fused_experts(
    hidden: torch.Tensor,
    w13: torch.Tensor,
    w2: torch.Tensor,
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
) -> torch.Tensor:
    ct = torch.promote_types(hidden.dtype, torch.float32)
    inter = w2.shape[-1]
    out = torch.zeros(hidden.shape, dtype=ct, device=hidden.device)
    for e in range(w13.shape[0]):
        tokens, slots = torch.nonzero(topk_ids == e, as_tuple=True)
        if tokens.numel() == 0:
            continue
        h = hidden[tokens].to(ct) @ w13[e].to(ct).T
        y = (F.silu(h[:, :inter]) * h[:, inter:]) @ w2[e].to(ct).T
        out.index_add_(0, tokens, y * topk_weights[tokens, slots].to(ct)[:, None])
    return out.to(hidden.dtype)


def fused_moe(
    hidden: torch.Tensor,
    w13: torch.Tensor,
    w2: torch.Tensor,
    router_logits: torch.Tensor,
    top_k: int,
    renormalize: bool,
) -> torch.Tensor:
    weights, ids = topk_softmax(router_logits, top_k, renormalize)
    return fused_experts(hidden, w13, w2, weights, ids)
