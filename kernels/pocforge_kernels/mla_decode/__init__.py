"""DeepSeek multi-head latent attention (MLA) decode over a paged latent cache. See :mod:`.op`."""

from .op import mla_decode

__all__ = ["mla_decode"]
