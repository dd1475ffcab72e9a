"""Causal, grouped-query, variable-length FlashAttention-2 prefill. See :mod:`.op`."""

from .op import flash_attention_prefill

__all__ = ["flash_attention_prefill"]
