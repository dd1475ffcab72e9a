"""MLA decode in plain torch: the spec of the Triton kernel, and the absorption identity.

DeepSeek-V2 (DeepSeek-AI 2024, "DeepSeek-V2: A Strong, Economical, and Efficient
Mixture-of-Experts Language Model", section 2.1) caches one latent vector per
token, ``c [R]`` (``kv_lora_rank`` R = 512), plus one decoupled RoPE key
``k_pe [P]`` (P = 64) shared by all heads.  Per head h, keys and values are
up-projections of the latent: ``k_h = [W_UK_h c ; k_pe]``, ``v_h = W_UV_h c``.
Absorbing ``W_UK_h`` into the query and ``W_UV_h`` into the output (section
2.1.3; FlashMLA and vLLM's MLA backend do the same) turns decode into
multi-query attention over the cache itself::

    q~_h = [W_UK_h.T q_nope_h ; q_pe_h]                     [R + P]
    o~_h = softmax(scale * q~_h @ [c ; k_pe].T) @ c           [R]
    o_h  = W_UV_h o~_h                                       [D_v]

Shapes: ``q [B, H, R + P]`` (absorbed), ``kv_cache [num_blocks, block_size, R + P]``
(latent then rope key, FlashMLA's layout with its single kv head squeezed),
``block_tables [B, max_blocks]``, ``context_lens [B]``; output ``[B, H, R]``.
"""

from __future__ import annotations

import torch

from ..paged_attention_decode.ref import gather_sequence


def mla_decode(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    scale: float,
    kv_lora_rank: int,
) -> torch.Tensor:
    ct = torch.promote_types(q.dtype, torch.float32)
    out = q.new_empty((*q.shape[:2], kv_lora_rank))
    for b, length in enumerate(context_lens.tolist()):
        entries = gather_sequence(kv_cache, block_tables[b], length).to(ct)  # [L, R + P]
        scores = scale * q[b].to(ct) @ entries.T  # [H, L]
        out[b] = (scores.softmax(-1) @ entries[:, :kv_lora_rank]).to(q.dtype)
    return out


def absorb_query(q_nope: torch.Tensor, q_pe: torch.Tensor, w_uk: torch.Tensor) -> torch.Tensor:
    """``q_nope [B, H, Dn]``, ``q_pe [B, H, P]``, ``w_uk [H, Dn, R]`` -> ``q~ [B, H, R + P]``."""
    return torch.cat([torch.einsum("bhd,hdr->bhr", q_nope, w_uk), q_pe], dim=-1)


def project_output(latent_out: torch.Tensor, w_uv: torch.Tensor) -> torch.Tensor:
    """``o~ [B, H, R]``, ``w_uv [H, Dv, R]`` -> ``o [B, H, Dv]``."""
    return torch.einsum("bhr,hvr->bhv", latent_out, w_uv)


def mla_decode_unabsorbed(
    q_nope: torch.Tensor,
    q_pe: torch.Tensor,
    latent: torch.Tensor,
    k_pe: torch.Tensor,
    w_uk: torch.Tensor,
    w_uv: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """Textbook MLA for one sequence: decompress keys and values per head, then attend.

    ``latent [L, R]``, ``k_pe [L, P]``, ``q_nope [H, Dn]``, ``q_pe [H, P]`` -> ``[H, Dv]``.
    """
    k_nope = torch.einsum("hdr,lr->hld", w_uk, latent)  # [H, L, Dn]
    values = torch.einsum("hvr,lr->hlv", w_uv, latent)  # [H, L, Dv]
    scores = torch.einsum("hd,hld->hl", q_nope, k_nope) + q_pe @ k_pe.T
    return torch.einsum("hl,hlv->hv", (scale * scores).softmax(-1), values)
