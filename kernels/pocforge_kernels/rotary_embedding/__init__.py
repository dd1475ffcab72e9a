"""Rotary position embedding (NeoX and GPT-J styles), in place. See :mod:`.op`."""

from .op import rotary_embedding

__all__ = ["rotary_embedding"]
