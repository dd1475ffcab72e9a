"""fp8 x fp8 GEMM with per-token / per-channel or DeepSeek-V3 block scales. See :mod:`.op`."""

from .op import fp8_gemm

__all__ = ["fp8_gemm"]
