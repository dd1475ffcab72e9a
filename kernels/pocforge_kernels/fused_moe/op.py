"""MoE entry points: ``pocforge::{topk_softmax, fused_experts, fused_moe}``.

``hidden [T, H]``, ``w13 [E, 2I, H]`` (gate rows then up rows), ``w2 [E, H, I]``,
``router_logits [T, E]``; output ``[T, H]`` in hidden's dtype.  The pipeline:

1. ``topk_softmax``: routing weights and expert ids per token (one kernel);
2. :func:`.align.align_block_size`: pairs sorted by expert, padded to BLOCK_M;
3. grouped GEMM with w13 -> ``[T*k, 2I]``; SiLU-and-mul (:mod:`..act_and_mul`) -> ``[T*k, I]``;
4. grouped GEMM with w2, scaled by the routing weight -> ``[T*k, H]`` in fp32;
5. sum over the k experts of each token.

Routing is softmax top-k (Mixtral, Qwen-MoE).  DeepSeek-V3's sigmoid,
group-limited routing is not implemented: compute its weights and ids yourself
and call :func:`fused_experts`; add its shared expert outside.  Launch configs:
``configs/<arch>.json`` keyed by the token count T, as vLLM keys its MoE configs.
"""

from __future__ import annotations

import torch
import triton

from .. import config
from ..act_and_mul.op import launch_forward as silu_and_mul_launch
from ..backend import check_device, dot_flags, use_reference
from . import ref
from .align import align_block_size
from .kernel import moe_grouped_gemm_kernel, topk_softmax_kernel

OP = "fused_moe"


def topk_softmax(router_logits: torch.Tensor, top_k: int, renormalize: bool = False):
    """``(weights [T, k] fp32, ids [T, k] int32)`` from ``router_logits [T, E]``."""
    return torch.ops.pocforge.topk_softmax(router_logits, top_k, renormalize)


def fused_experts(hidden, w13, w2, topk_weights, topk_ids) -> torch.Tensor:
    """The expert MLPs of already-routed tokens, combined with their routing weights."""
    return torch.ops.pocforge.fused_experts(hidden, w13, w2, topk_weights, topk_ids)


def fused_moe(hidden, w13, w2, router_logits, top_k: int, renormalize: bool = False):
    """Routing plus experts: the whole MoE layer but its shared expert."""
    return torch.ops.pocforge.fused_moe(hidden, w13, w2, router_logits, top_k, renormalize)


def launch_topk_softmax(router_logits, top_k, renormalize):
    check_device(router_logits)
    n_tokens, n_experts = router_logits.shape
    if not 0 < top_k <= n_experts:
        raise ValueError(f"topk_softmax: top_k {top_k} must be in 1..{n_experts}")
    logits = router_logits if router_logits.stride(-1) == 1 else router_logits.contiguous()
    weights = torch.empty((n_tokens, top_k), dtype=torch.float32, device=logits.device)
    ids = torch.empty((n_tokens, top_k), dtype=torch.int32, device=logits.device)
    if n_tokens:
        topk_softmax_kernel[(n_tokens,)](
            logits,
            weights,
            ids,
            n_experts,
            logits.stride(0),
            TOP_K=top_k,
            RENORMALIZE=renormalize,
            BLOCK_E=triton.next_power_of_2(n_experts),
        )
    return weights, ids


def _grouped_gemm(
    a,
    b,
    out,
    topk_weights,
    sorted_ids,
    expert_ids,
    num_pairs,
    a_rows_per_pair,
    mul_routed_weight,
    cfg,
):
    n, k = b.shape[1], b.shape[2]
    grid = (expert_ids.numel(), triton.cdiv(n, cfg["BLOCK_N"]))
    moe_grouped_gemm_kernel[grid](
        a,
        b,
        out,
        topk_weights,
        sorted_ids,
        expert_ids,
        n,
        k,
        num_pairs,
        a_rows_per_pair,
        a.stride(0),
        b.stride(0),
        b.stride(1),
        out.stride(0),
        MUL_ROUTED_WEIGHT=mul_routed_weight,
        BLOCK_M=cfg["BLOCK_M"],
        BLOCK_N=cfg["BLOCK_N"],
        BLOCK_K=cfg["BLOCK_K"],
        num_warps=cfg["num_warps"],
        num_stages=cfg["num_stages"],
        **dot_flags(a.dtype),
    )


def launch_fused_experts(hidden, w13, w2, topk_weights, topk_ids):
    check_device(hidden, w13, w2, topk_weights, topk_ids)
    n_tokens, hidden_size = hidden.shape
    n_experts, two_inter, _ = w13.shape
    top_k = topk_ids.shape[1]
    if w13.shape[2] != hidden_size or w2.shape != (n_experts, hidden_size, two_inter // 2):
        raise ValueError(
            f"fused_experts: w13 {tuple(w13.shape)} and w2 {tuple(w2.shape)} do not "
            f"fit hidden size {hidden_size}"
        )
    if n_tokens == 0:
        return torch.empty_like(hidden)
    hidden = hidden.contiguous()
    w13, w2 = w13.contiguous(), w2.contiguous()
    weights = topk_weights.to(torch.float32).contiguous()
    cfg = config.launch_config(OP, n_tokens, device=hidden.device)
    sorted_ids, expert_ids = align_block_size(topk_ids, n_experts, cfg["BLOCK_M"])
    num_pairs = n_tokens * top_k

    gate_up = torch.empty((num_pairs, two_inter), dtype=hidden.dtype, device=hidden.device)
    _grouped_gemm(
        hidden, w13, gate_up, weights, sorted_ids, expert_ids, num_pairs, top_k, False, cfg
    )
    activated = silu_and_mul_launch(gate_up, "silu")
    # fp32 per-pair outputs so the k-way combine adds unrounded terms.
    down = torch.empty((num_pairs, hidden_size), dtype=torch.float32, device=hidden.device)
    _grouped_gemm(activated, w2, down, weights, sorted_ids, expert_ids, num_pairs, 1, True, cfg)
    return down.view(n_tokens, top_k, hidden_size).sum(1).to(hidden.dtype)


@torch.library.custom_op("pocforge::topk_softmax", mutates_args=())
def _topk_softmax(
    router_logits: torch.Tensor, top_k: int, renormalize: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    if use_reference():
        return ref.topk_softmax(router_logits, top_k, renormalize)
    return launch_topk_softmax(router_logits, top_k, renormalize)


@_topk_softmax.register_fake
def _(router_logits, top_k, renormalize):
    shape = (router_logits.shape[0], top_k)
    return (
        router_logits.new_empty(shape, dtype=torch.float32),
        router_logits.new_empty(shape, dtype=torch.int32),
    )


@torch.library.custom_op("pocforge::fused_experts", mutates_args=())
def _fused_experts(
    hidden: torch.Tensor,
    w13: torch.Tensor,
    w2: torch.Tensor,
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
) -> torch.Tensor:
    if use_reference():
        return ref.fused_experts(hidden, w13, w2, topk_weights, topk_ids)
    return launch_fused_experts(hidden, w13, w2, topk_weights, topk_ids)


@_fused_experts.register_fake
def _(hidden, w13, w2, topk_weights, topk_ids):
    return torch.empty_like(hidden)


@torch.library.custom_op("pocforge::fused_moe", mutates_args=())
def _fused_moe(
    hidden: torch.Tensor,
    w13: torch.Tensor,
    w2: torch.Tensor,
    router_logits: torch.Tensor,
    top_k: int,
    renormalize: bool,
) -> torch.Tensor:
    if use_reference():
        return ref.fused_moe(hidden, w13, w2, router_logits, top_k, renormalize)
    weights, ids = launch_topk_softmax(router_logits, top_k, renormalize)
    return launch_fused_experts(hidden, w13, w2, weights, ids)


@_fused_moe.register_fake
def _(hidden, w13, w2, router_logits, top_k, renormalize):
    return torch.empty_like(hidden)
