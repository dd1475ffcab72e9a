"""The GPU catalog: facts per GPU type, from ``pocforge_kernels.devices`` (the one reader of
``devices.yaml``, shared with the kernel roofline and the compile check), validated here as
the kit's own model (tuned numbers are data)."""

from __future__ import annotations

from dataclasses import asdict
from functools import cache
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pocforge_kernels import devices

Fraction = Annotated[float, Field(ge=0, le=1)]  # of a peak; 0 only on the cpu entry


class GPU(BaseModel):
    """One GPU type's data-sheet facts (dense peaks, per GPU), its reference platform's
    topology and NICs, and the achievable fractions of the peaks (each field is documented
    in the header of ``devices.yaml``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    vendor: Literal["amd", "nvidia", "none"]
    arch: str
    platform: str
    hbm_gb: float = Field(ge=0)
    hbm_tbs: float = Field(ge=0)
    bf16_tflops: float = Field(ge=0)
    fp8_tflops: float = Field(ge=0)
    fp4_tflops: float = Field(ge=0)
    link_gbs: float = Field(ge=0)
    topology: Literal["mesh", "switch", "none"]
    gpus_per_node: int = Field(ge=1)
    nic_gbs: float = Field(ge=0)
    fp8_format: str
    matrix_eff: Fraction
    fp8_matrix_eff: Fraction
    hbm_eff: Fraction
    link_eff: Fraction
    source: str
    eff_source: str

    @model_validator(mode="after")
    def _consistent(self) -> GPU:
        if (self.topology == "none") != (not self.is_gpu):
            raise ValueError(f"{self.name}: topology 'none' is for the cpu entry only")
        if self.topology == "mesh" and self.gpus_per_node < 2:
            raise ValueError(f"{self.name}: a mesh needs gpus_per_node >= 2")
        if self.is_gpu and not all(
            (self.matrix_eff, self.fp8_matrix_eff, self.hbm_eff, self.link_eff)
        ):
            raise ValueError(f"{self.name}: a GPU's achievable fractions must be above 0")
        if self.fp4_tflops and self.fp4_tflops < self.fp8_tflops:
            raise ValueError(f"{self.name}: fp4_tflops below fp8_tflops")
        return self

    @property
    def is_gpu(self) -> bool:
        return self.vendor != "none"

    def dense_tflops(self, dtype: str) -> float | None:
        """Dense matrix peak for a training dtype, the denominator of MFU: bfloat16 and
        float16 run on the bf16 peak, fp8 on the fp8 peak; None for float32 (no matrix peak
        in the catalog) and on the cpu entry."""
        if not self.is_gpu:
            return None
        return {
            "bfloat16": self.bf16_tflops,
            "float16": self.bf16_tflops,
            "fp8": self.fp8_tflops,
        }.get(dtype)

    @property
    def pair_gbs(self) -> float:
        """Peak one-direction bandwidth between two GPUs of one node: the full link through a
        switch, one of the gpus_per_node-1 links of a full mesh, none on the cpu entry."""
        if self.topology == "switch":
            return self.link_gbs
        if self.topology == "mesh":
            return self.link_gbs / (self.gpus_per_node - 1)
        return 0.0


@cache
def _catalog() -> dict[str, GPU]:
    return {name: GPU(**asdict(facts)) for name, facts in devices.gpus().items()}


def gpu_names() -> list[str]:
    return list(_catalog())


def gpu(name: str) -> GPU:
    """Facts for ``name``; raises ``KeyError`` naming the known types."""
    try:
        return _catalog()[name]
    except KeyError:
        raise KeyError(f"unknown GPU type {name!r} (known: {', '.join(_catalog())})") from None
