"""Decode attention over a paged KV cache, split-K with a reduction pass. See :mod:`.op`."""

from .op import paged_attention_decode

__all__ = ["paged_attention_decode"]
