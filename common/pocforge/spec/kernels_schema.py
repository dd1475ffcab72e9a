"""The spec's `kernels:` section: which of the kit's kernels to accept on the cluster's GPUs.

Every field has a description; ``pocs/SPEC.md`` is generated from them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import (
    Field,
)

from pocforge.spec.base import Strict

KERNEL_OPS = (
    "rms_norm",
    "rotary_embedding",
    "silu_and_mul",
    "gelu_and_mul",
    "flash_attention_prefill",
    "paged_attention_decode",
    "fused_moe",
    "mla_decode",
    "fp8_quant",
    "fp8_gemm",
)
KernelOp = Literal[KERNEL_OPS]  # type: ignore[valid-type]


class KernelAcceptance(Strict):
    op: KernelOp = Field(description="Kernel from the kit's library.")
    shapes: list[dict[str, int]] = Field(
        default_factory=list,
        description="Problem sizes, e.g. `{tokens: 4096, hidden: 8192}`; default: shapes derived from the model.",
    )
    dtypes: list[Literal["float32", "bfloat16", "float16", "fp8"]] = Field(
        default_factory=lambda: ["bfloat16"], description="Dtypes to check."
    )
    tolerance: float | None = Field(None, gt=0, description="Relative-error tolerance override.")


class KernelsSpec(Strict):
    ops: list[KernelAcceptance] = Field(
        min_length=1, description="Kernels to accept on the cluster's GPUs."
    )
