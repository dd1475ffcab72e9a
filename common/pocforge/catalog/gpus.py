"""The GPU catalog: facts per GPU type, read from ``pocforge_kernels``' ``devices.yaml`` (one file, shared with the kernel roofline) (tuned numbers are data)."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict


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
    raw = yaml.safe_load(resources.files("pocforge_kernels").joinpath("devices.yaml").read_text())
    return {name: GPU(name=name, **facts) for name, facts in raw.items()}


def gpu_names() -> list[str]:
    return list(_catalog())


def gpu(name: str) -> GPU:
    """Facts for ``name``; raises ``KeyError`` naming the known types."""
    try:
        return _catalog()[name]
    except KeyError:
        raise KeyError(f"unknown GPU type {name!r} (known: {', '.join(_catalog())})") from None
