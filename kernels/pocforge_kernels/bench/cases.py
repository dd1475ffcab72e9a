"""One benchmark case per (op, model): inputs, the kernel call, its reference, and its traffic.

``bytes`` counts each tensor the op must read or write once (the minimum HBM
traffic); ``flops`` counts multiply-adds as two.  Both define the roofline
numbers, so they are written out per op rather than measured.  ``peers`` are
other implementations of the same op that are available on the machine, each
timed in the same run: vLLM's kernel when vLLM is installed, and PyTorch's own
fused op where one exists (SDPA for prefill attention, ``torch._scaled_mm`` for
the fp8 GEMM, ``F.rms_norm``), so a GPU without vLLM still has a peer to beat.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from .. import load


@dataclass
class Case:
    op: str
    shape: str
    kernel: Callable[[], object]
    reference: Callable[[], object]
    nbytes: float
    flops: float
    precision: str = "bf16"  # which compute peak applies: "bf16" or "fp8"
    tolerance_dtype: torch.dtype = torch.bfloat16
    peers: dict[str, Callable[[], object]] = field(default_factory=dict)


def randn(*shape, device, dtype=None, scale: float = 1.0) -> torch.Tensor:
    """Standard-normal input times ``scale``.

    Every case input comes from here so that the compile-only check
    (:mod:`.aot`) can hand out ``torch.empty`` instead: it never touches its
    pages, so DeepSeek-V3's 22 GB of expert weights cost no memory there.
    """
    t = torch.randn(*shape, device=device, dtype=dtype)
    return t.mul_(scale) if scale != 1.0 else t


def _size(*tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _vllm_ops():
    """vLLM's ``_custom_ops`` module when vLLM is installed, else None."""
    try:
        from vllm import _custom_ops
    except Exception:  # not installed, or built for another device
        return None
    return _custom_ops


def rms_norm(m, w, device, dtype):
    t, h = w["decode_batch"], m["hidden_size"]
    x, weight = (
        randn(t, h, device=device, dtype=dtype),
        randn(h, device=device, dtype=dtype),
    )
    from ..rms_norm import ref

    ops = _vllm_ops()

    def vllm():
        out = torch.empty_like(x)
        ops.rms_norm(out, x, weight, 1e-6)
        return out

    return Case(
        "rms_norm",
        f"T={t} H={h}",
        lambda: load("rms_norm")(x, weight, 1e-6),
        lambda: ref.rms_norm(x, weight, 1e-6),
        2 * _size(x) + _size(weight),
        4 * t * h,
        tolerance_dtype=dtype,
        peers={
            "torch F.rms_norm": lambda: F.rms_norm(x, (h,), weight, 1e-6),
            **({"vLLM": vllm} if ops else {}),
        },
    )


def rotary_embedding(m, w, device, dtype):
    t, hq, hk, d = (
        w["decode_batch"],
        m["num_attention_heads"],
        m["num_key_value_heads"],
        m["head_dim"],
    )
    from ..rotary_embedding import ref

    positions = torch.randint(0, 4096, (t,), device=device)
    q, k = (
        randn(t, hq * d, device=device, dtype=dtype),
        randn(t, hk * d, device=device, dtype=dtype),
    )
    cache = ref.build_cos_sin_cache(4096, d, dtype=dtype, device=device)
    ops = _vllm_ops()

    def run(fn):
        def call():
            qc, kc = q.clone(), k.clone()
            fn(positions, qc, kc, d, cache, True)
            return qc, kc

        return call

    return Case(
        "rotary_embedding",
        f"T={t} Hq={hq} Hkv={hk} D={d}",
        run(load("rotary_embedding")),
        run(ref.rotary_embedding),
        2 * _size(q, k) + t * d * cache.element_size(),
        3 * t * (hq + hk) * d,
        tolerance_dtype=dtype,
        peers={"vLLM": run(ops.rotary_embedding)} if ops else {},
    )


def silu_and_mul(m, w, device, dtype):
    t, i = w["decode_batch"], m["intermediate_size"]
    x = randn(t, 2 * i, device=device, dtype=dtype)
    from ..act_and_mul import ref

    def vllm():
        out = torch.empty(t, i, device=device, dtype=dtype)
        torch.ops._C.silu_and_mul(out, x)
        return out

    return Case(
        "silu_and_mul",
        f"T={t} I={i}",
        lambda: load("silu_and_mul")(x),
        lambda: ref.silu_and_mul(x),
        _size(x) * 3 // 2,
        5 * t * i,
        tolerance_dtype=dtype,
        peers={"vLLM": vllm} if _vllm_ops() else {},
    )


def per_token_quant_fp8(m, w, device, dtype):
    from ..fp8_quant import default_fp8_dtype, ref

    t, h = w["decode_batch"], m["hidden_size"]
    x = randn(t, h, device=device, dtype=dtype)
    fp8 = default_fp8_dtype(device)
    ops = _vllm_ops()
    return Case(
        "per_token_quant_fp8",
        f"T={t} H={h} {fp8}".replace("torch.", ""),
        lambda: load("per_token_quant_fp8")(x, fp8),
        lambda: ref.per_token_quant_fp8(x, fp8),
        _size(x) * 3 // 2 + 4 * t,
        3 * t * h,
        tolerance_dtype=fp8,
        peers={"vLLM": lambda: ops.scaled_fp8_quant(x, use_per_token_if_dynamic=True)}
        if ops
        else {},
    )


def per_block_quant_fp8(m, w, device, dtype):
    from ..fp8_quant import default_fp8_dtype, ref

    n, k = m["moe_intermediate_size"] * 2, m["hidden_size"]
    x = randn(n, k, device=device, dtype=dtype)
    fp8 = default_fp8_dtype(device)
    return Case(
        "per_block_quant_fp8",
        f"N={n} K={k} {fp8}".replace("torch.", ""),
        lambda: load("per_block_quant_fp8")(x, fp8),
        lambda: ref.per_block_quant_fp8(x, fp8),
        _size(x) * 3 // 2,
        3 * n * k,
        tolerance_dtype=fp8,
    )


def fp8_gemm(m, w, device, dtype):
    from ..fp8_gemm import ref
    from ..fp8_quant import default_fp8_dtype
    from ..fp8_quant import ref as quant

    block = m.get("fp8_block_scales", False)  # DeepSeek-V3 ships 128 x 128 block-scaled weights
    t, k = w["decode_batch"], m["hidden_size"]
    n = 2 * m.get("moe_intermediate_size" if block else "intermediate_size")
    fp8 = default_fp8_dtype(device)
    a, a_s = quant.per_token_quant_fp8(randn(t, k, device=device), fp8, 128 if block else None)
    wq = randn(n, k, device=device)
    b, b_s = quant.per_block_quant_fp8(wq, fp8) if block else quant.per_token_quant_fp8(wq, fp8)
    scales = "1x128 / 128x128 block" if block else "per-token / per-channel"

    def scaled_mm():  # cuBLASLt / hipBLASLt with row-wise scales (no block scales there)
        return torch._scaled_mm(a, b.t(), scale_a=a_s, scale_b=b_s.t(), out_dtype=dtype)

    return Case(
        "fp8_gemm",
        f"M={t} N={n} K={k} {scales}",
        lambda: load("fp8_gemm")(a, a_s, b, b_s, dtype),
        lambda: ref.fp8_gemm(a, a_s, b, b_s, dtype),
        _size(a, b, a_s, b_s) + t * n * torch.finfo(dtype).bits // 8,
        2 * t * n * k,
        precision="fp8",
        tolerance_dtype=dtype,
        peers={} if block else {"torch _scaled_mm": scaled_mm},
    )


def flash_attention_prefill(m, w, device, dtype):
    from ..flash_attention_prefill import ref

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
        lambda: load("flash_attention_prefill")(q, k, v, cu, length, scale),
        lambda: ref.flash_attention_prefill(q, k, v, cu, scale),
        2 * _size(q) + _size(k, v),
        4 * causal_pairs * hq * d,
        tolerance_dtype=dtype,
        peers={"torch SDPA": sdpa},
    )


def _paged_cache(batch, context, block_size, width, device, dtype):
    blocks_per_seq = -(-context // block_size)
    cache = randn(batch * blocks_per_seq, block_size, *width, device=device, dtype=dtype)
    tables = torch.randperm(batch * blocks_per_seq, device=device).view(batch, -1).to(torch.int32)
    lens = torch.full((batch,), context, device=device, dtype=torch.int32)
    return cache, tables, lens


def paged_attention_decode(m, w, device, dtype):
    from ..paged_attention_decode import ref

    b, ctx, bs = w["decode_batch"], w["context_len"], w["block_size"]
    hq, hk, d = m["num_attention_heads"], m["num_key_value_heads"], m["head_dim"]
    k_cache, tables, lens = _paged_cache(b, ctx, bs, (hk, d), device, dtype)
    v_cache = randn(*k_cache.shape, device=device, dtype=dtype)
    q = randn(b, hq, d, device=device, dtype=dtype)
    scale = d**-0.5
    kv_bytes = 2 * b * ctx * hk * d * k_cache.element_size()
    return Case(
        "paged_attention_decode",
        f"B={b} ctx={ctx} Hq={hq} Hkv={hk} D={d} bs={bs}",
        lambda: load("paged_attention_decode")(q, k_cache, v_cache, tables, lens, ctx, scale),
        lambda: ref.paged_attention_decode(q, k_cache, v_cache, tables, lens, scale),
        kv_bytes + 2 * _size(q),
        4 * b * ctx * hq * d,
        tolerance_dtype=dtype,
    )


def _grouped_mm_moe(x, w13, w2, weights, ids, align: int = 16):
    """The MoE layer the way torchtitan writes it: pairs sorted by expert into groups padded
    to ``align`` rows, then PyTorch's grouped GEMM (CUTLASS on CUDA) for w13 and w2."""
    n_tokens, top_k = ids.shape
    n_experts, inter = w13.shape[0], w2.shape[2]
    flat = ids.reshape(-1).long()
    counts = torch.bincount(flat, minlength=n_experts)
    padded = (counts + align - 1) // align * align
    ends = padded.cumsum(0)
    order = torch.argsort(flat, stable=True)
    experts = flat[order]
    rank = torch.arange(flat.numel(), device=x.device) - (counts.cumsum(0) - counts)[experts]
    dest = (ends - padded)[experts] + rank  # each sorted pair's row in the padded groups
    rows = x.new_zeros(flat.numel() + n_experts * (align - 1), x.shape[1])
    rows[dest] = x[order // top_k]
    offs = ends.to(torch.int32)
    gate_up = torch._grouped_mm(rows, w13.transpose(1, 2), offs=offs)
    act = F.silu(gate_up[:, :inter]) * gate_up[:, inter:]
    down = torch._grouped_mm(act, w2.transpose(1, 2), offs=offs)[dest].float()
    out = torch.zeros(n_tokens, x.shape[1], device=x.device, dtype=torch.float32)
    out.index_add_(0, order // top_k, down * weights.reshape(-1)[order, None])
    return out.to(x.dtype)


def fused_moe(m, w, device, dtype):
    from ..fused_moe import ref

    t, h, e, top_k = w["moe_tokens"], m["hidden_size"], m["num_experts"], m["top_k"]
    i = m.get("moe_intermediate_size") or m["intermediate_size"]
    x = randn(t, h, device=device, dtype=dtype)
    w13 = randn(e, 2 * i, h, device=device, dtype=dtype, scale=h**-0.5)
    w2 = randn(e, h, i, device=device, dtype=dtype, scale=i**-0.5)
    logits = randn(t, e, device=device, dtype=dtype)
    renorm = m["renormalize"]
    _, ids = ref.topk_softmax(logits, top_k, renorm)
    active = ids.unique().numel()  # only routed-to experts' weights are read
    weight_bytes = active * 3 * h * i * x.element_size()

    def grouped():
        return _grouped_mm_moe(x, w13, w2, *ref.topk_softmax(logits, top_k, renorm))

    def vllm():
        from vllm.model_executor.layers.fused_moe import fused_experts

        weights, topk_ids = ref.topk_softmax(logits, top_k, renorm)
        return fused_experts(x, w13, w2, weights, topk_ids)

    return Case(
        "fused_moe",
        f"T={t} H={h} I={i} E={e} top{top_k}",
        lambda: load("fused_moe")(x, w13, w2, logits, top_k, renorm),
        lambda: ref.fused_moe(x, w13, w2, logits, top_k, renorm),
        weight_bytes + 2 * _size(x),
        6 * t * top_k * h * i,
        tolerance_dtype=dtype,
        peers={
            **({"torch _grouped_mm": grouped} if hasattr(torch, "_grouped_mm") else {}),
            **({"vLLM": vllm} if _vllm_ops() and device.type == "cuda" else {}),
        },
    )


def mla_decode(m, w, device, dtype):
    from ..mla_decode import ref

    b, ctx, bs = w["decode_batch"], w["context_len"], w["block_size"]
    heads = m.get("mla_heads") or m["num_attention_heads"]
    rank, rope = m["kv_lora_rank"], m["qk_rope_head_dim"]
    cache, tables, lens = _paged_cache(b, ctx, bs, (rank + rope,), device, dtype)
    q = randn(b, heads, rank + rope, device=device, dtype=dtype)
    scale = (m["qk_nope_head_dim"] + rope) ** -0.5
    return Case(
        "mla_decode",
        f"B={b} ctx={ctx} H={heads} R={rank}+{rope} bs={bs}",
        lambda: load("mla_decode")(q, cache, tables, lens, ctx, scale, rank),
        lambda: ref.mla_decode(q, cache, tables, lens, scale, rank),
        b * ctx * (rank + rope) * cache.element_size() + _size(q) * 2,
        2 * b * ctx * heads * (2 * rank + rope),
        tolerance_dtype=dtype,
    )


BUILDERS = {
    f.__name__: f
    for f in (
        rms_norm,
        rotary_embedding,
        silu_and_mul,
        per_token_quant_fp8,
        per_block_quant_fp8,
        fp8_gemm,
        flash_attention_prefill,
        paged_attention_decode,
        fused_moe,
        mla_decode,
    )
}
