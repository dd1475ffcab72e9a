"""Paged decode attention's benchmark case and the variant the compile check adds (see
:mod:`..bench.case`)."""

from __future__ import annotations

import torch

from .. import load
from ..bench.case import Case, paged_cache, randn, size
from . import ref


def paged_attention_decode(m, w, device, dtype):
    b, ctx, bs = w["decode_batch"], w["context_len"], w["block_size"]
    hq, hk, d = m["num_attention_heads"], m["num_key_value_heads"], m["head_dim"]
    k_cache, tables, lens = paged_cache(b, ctx, bs, (hk, d), device, dtype)
    v_cache = randn(*k_cache.shape, device=device, dtype=dtype)
    q = randn(b, hq, d, device=device, dtype=dtype)
    scale = d**-0.5
    kv_bytes = 2 * b * ctx * hk * d * k_cache.element_size()
    return Case(
        "paged_attention_decode",
        f"B={b} ctx={ctx} Hq={hq} Hkv={hk} D={d} bs={bs}",
        {"B": b, "ctx": ctx, "Hq": hq, "Hkv": hk, "D": d, "bs": bs},
        lambda: load("paged_attention_decode")(q, k_cache, v_cache, tables, lens, ctx, scale),
        lambda: ref.paged_attention_decode(q, k_cache, v_cache, tables, lens, scale),
        kv_bytes + 2 * size(q),
        4 * b * ctx * hq * d,
        tolerance_dtype=dtype,
    )


CASES = {"paged_attention_decode": (paged_attention_decode,)}


def _block_32(m, w, device, dtype):
    b, ctx = w["decode_batch"], w["context_len"]
    hq, hk, d = m["num_attention_heads"], m["num_key_value_heads"], m["head_dim"]

    def empty(*shape):
        return torch.empty(*shape, device=device, dtype=dtype)

    blocks = -(-ctx // 32)
    cache = (empty(b * blocks, 32, hk, d) for _ in range(2))
    tables = torch.zeros(b, blocks, dtype=torch.int32, device=device)
    lens = torch.full((b,), ctx, dtype=torch.int32, device=device)
    load("paged_attention_decode")(empty(b, hq, d), *cache, tables, lens, ctx, d**-0.5)


# The case pages in 16-token blocks (vLLM's default); a framework set to 32-token blocks
# compiles another variant.
COMPILE_VARIANTS = {"paged_attention_decode 32-token blocks": _block_32}
