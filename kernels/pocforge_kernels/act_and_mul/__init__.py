"""Gated activations ``act(gate) * up``: SiLU (SwiGLU) and GELU (GeGLU). See :mod:`.op`."""

from .op import gelu_and_mul, silu_and_mul

__all__ = ["gelu_and_mul", "silu_and_mul"]
