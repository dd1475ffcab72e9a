"""Dynamic fp8 (e4m3) quantization per token, per 1 x g group and per 128 x 128 block."""

from .op import default_fp8_dtype, per_block_quant_fp8, per_token_quant_fp8

__all__ = ["default_fp8_dtype", "per_block_quant_fp8", "per_token_quant_fp8"]
