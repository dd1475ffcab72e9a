"""Rotary embedding's benchmark case and the variant the compile check adds (see
:mod:`..bench.case`)."""

from __future__ import annotations

import torch

from .. import load
from ..bench.case import Case, randn, size, vllm_ops
from . import ref


def rotary_embedding(m, w, device, dtype):
    t, hq, hk, d = (
        w["decode_batch"],
        m["num_attention_heads"],
        m["num_key_value_heads"],
        m["head_dim"],
    )
    positions = torch.randint(0, 4096, (t,), device=device)
    q, k = (
        randn(t, hq * d, device=device, dtype=dtype),
        randn(t, hk * d, device=device, dtype=dtype),
    )
    cache = ref.build_cos_sin_cache(4096, d, dtype=dtype, device=device)
    ops = vllm_ops()

    def run(fn):
        def call():
            qc, kc = q.clone(), k.clone()
            fn(positions, qc, kc, d, cache, True)
            return qc, kc

        return call

    return Case(
        "rotary_embedding",
        f"T={t} Hq={hq} Hkv={hk} D={d}",
        {"T": t, "Hq": hq, "Hkv": hk, "D": d},
        run(load("rotary_embedding")),
        run(ref.rotary_embedding),
        2 * size(q, k) + t * d * cache.element_size(),
        3 * t * (hq + hk) * d,
        tolerance_dtype=dtype,
        peers={"vLLM": run(ops.rotary_embedding)} if ops else {},
    )


CASES = {"rotary_embedding": (rotary_embedding,)}


def _gptj(m, w, device, dtype):
    t, hq, hk, d = (
        w["decode_batch"],
        m["num_attention_heads"],
        m["num_key_value_heads"],
        m["head_dim"],
    )

    def empty(*shape):
        return torch.empty(*shape, device=device, dtype=dtype)

    positions = torch.zeros(t, dtype=torch.long, device=device)
    load("rotary_embedding")(
        positions, empty(t, hq * d), empty(t, hk * d), d, empty(4096, d), False
    )


# GPT-J style (interleaved pairs, is_neox=False) compiles a kernel of its own.
COMPILE_VARIANTS = {"rotary_embedding GPT-J style": _gptj}
