"""Fused MoE's benchmark case (see :mod:`..bench.case`), with the torchtitan-style grouped-GEMM
layer and vLLM's ``fused_experts`` as peers."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .. import load
from ..bench.case import Case, randn, size, vllm_ops
from . import ref


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
        {"T": t, "H": h, "I": i, "E": e, "top_k": top_k},
        lambda: load("fused_moe")(x, w13, w2, logits, top_k, renorm),
        lambda: ref.fused_moe(x, w13, w2, logits, top_k, renorm),
        weight_bytes + 2 * size(x),
        6 * t * top_k * h * i,
        tolerance_dtype=dtype,
        peers={
            **({"torch _grouped_mm": grouped} if hasattr(torch, "_grouped_mm") else {}),
            **({"vLLM": vllm} if vllm_ops() and device.type == "cuda" else {}),
        },
    )


CASES = {"fused_moe": (fused_moe,)}
