"""MLA decode's benchmark case (see :mod:`..bench.case`): DeepSeek's latent KV cache, paged."""

from __future__ import annotations

from .. import load
from ..bench.case import Case, paged_cache, randn, size
from . import ref


def mla_decode(m, w, device, dtype):
    b, ctx, bs = w["decode_batch"], w["context_len"], w["block_size"]
    heads = m.get("mla_heads") or m["num_attention_heads"]
    rank, rope = m["kv_lora_rank"], m["qk_rope_head_dim"]
    cache, tables, lens = paged_cache(b, ctx, bs, (rank + rope,), device, dtype)
    q = randn(b, heads, rank + rope, device=device, dtype=dtype)
    scale = (m["qk_nope_head_dim"] + rope) ** -0.5
    return Case(
        "mla_decode",
        f"B={b} ctx={ctx} H={heads} R={rank}+{rope} bs={bs}",
        {"B": b, "ctx": ctx, "H": heads, "R": rank, "rope": rope, "bs": bs},
        lambda: load("mla_decode")(q, cache, tables, lens, ctx, scale, rank),
        lambda: ref.mla_decode(q, cache, tables, lens, scale, rank),
        b * ctx * (rank + rope) * cache.element_size() + size(q) * 2,
        2 * b * ctx * heads * (2 * rank + rope),
        tolerance_dtype=dtype,
    )


CASES = {"mla_decode": (mla_decode,)}
