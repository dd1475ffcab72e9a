"""The GPU catalog: facts per GPU type, from ``pocforge_kernels.devices`` (the one reader of
``devices.yaml``, shared with the kernel roofline and the compile check), validated here as
the kit's own model (tuned numbers are data)."""

from __future__ import annotations

from dataclasses import asdict
from functools import cache
from typing import Literal

from pydantic import BaseModel, ConfigDict

from pocforge_kernels import devices


class GPU(BaseModel):
    """One GPU type's data-sheet facts (dense peaks, per GPU)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    vendor: Literal["amd", "nvidia", "none"]
    arch: str
    hbm_gb: float
    hbm_tbs: float
    bf16_tflops: float
    fp8_tflops: float
    link_gbs: float
    fp8_format: str
    source: str

    @property
    def is_gpu(self) -> bool:
        return self.vendor != "none"


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
