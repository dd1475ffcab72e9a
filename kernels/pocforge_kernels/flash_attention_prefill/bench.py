"""Prefill attention's benchmark case and the variant the compile check adds (see
:mod:`..bench.case`)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .. import load
from ..bench.case import Case, randn, size
from . import ref


def flash_attention_prefill(m, w, device, dtype):
    seqs, total = w["prefill_seqs"], w["prefill_tokens"]
    length = total // seqs
    hq, hk, d = m["num_attention_heads"], m["num_key_value_heads"], m["head_dim"]
    q = randn(seqs * length, hq, d, device=device, dtype=dtype)
    k, v = (randn(seqs * length, hk, d, device=device, dtype=dtype) for _ in range(2))
    cu = torch.arange(0, seqs + 1, device=device, dtype=torch.int32) * length
    scale = d**-0.5
    causal_pairs = seqs * length * (length + 1) / 2

    def sdpa():  # PyTorch's fused attention (FlashAttention-2 / CK / cuDNN), GQA in-kernel
        outs = []
        for s in range(seqs):
            rows = slice(s * length, (s + 1) * length)
            qs, ks, vs = (t[rows].transpose(0, 1) for t in (q, k, v))
            o = F.scaled_dot_product_attention(
                qs, ks, vs, is_causal=True, scale=scale, enable_gqa=True
            )
            outs.append(o.transpose(0, 1))
        return outs[0] if seqs == 1 else torch.cat(outs)

    return Case(
        "flash_attention_prefill",
        f"{seqs}x{length} tokens Hq={hq} Hkv={hk} D={d}",
        {"seqs": seqs, "seq_len": length, "Hq": hq, "Hkv": hk, "D": d},
        lambda: load("flash_attention_prefill")(q, k, v, cu, length, scale),
        lambda: ref.flash_attention_prefill(q, k, v, cu, scale),
        2 * size(q) + size(k, v),
        4 * causal_pairs * hq * d,
        tolerance_dtype=dtype,
        peers={"torch SDPA": sdpa},
    )


CASES = {"flash_attention_prefill": (flash_attention_prefill,)}


def _not_causal(m, w, device, dtype):
    n = w["prefill_tokens"]
    hq, hk, d = m["num_attention_heads"], m["num_key_value_heads"], m["head_dim"]

    def empty(*shape):
        return torch.empty(*shape, device=device, dtype=dtype)

    cu = torch.tensor([0, n], dtype=torch.int32, device=device)
    load("flash_attention_prefill")(
        empty(n, hq, d), empty(n, hk, d), empty(n, hk, d), cu, n, None, False
    )


# Encoders and cross-attention run without the causal mask, a kernel of their own.
COMPILE_VARIANTS = {"flash_attention_prefill not causal": _not_causal}
