"""Mixture-of-experts layer: top-k softmax routing, expert-sorted grouped GEMMs. See :mod:`.op`."""

from .op import fused_experts, fused_moe, topk_softmax

__all__ = ["fused_experts", "fused_moe", "topk_softmax"]
