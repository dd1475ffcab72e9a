"""The device roofline: peak HBM bandwidth and matrix throughput from ``kernels/pocforge_kernels/devices.yaml``.

A kernel's floor time is ``max(bytes / bandwidth, flops / peak)``; whichever
term is larger is the *binding* resource, and the percentage of roofline is
``floor / measured``.  The catalog is the kit's single source of device facts;
this module only reads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

CATALOG = Path(__file__).resolve().parent.parent / "devices.yaml"


@cache
def catalog() -> dict[str, dict]:
    return yaml.safe_load(CATALOG.read_text())


def match_device(name: str) -> str | None:
    """The catalog key named inside a device name ("NVIDIA H100 80GB HBM3" -> "H100")."""
    if name == "cpu":
        return "cpu"
    upper = name.upper()
    for key in sorted(catalog(), key=len, reverse=True):  # MI325X before a shorter key
        if key != "cpu" and key.upper() in upper:
            return key
    return None


@dataclass(frozen=True)
class Roofline:
    device: str
    hbm_tbs: float
    tflops: dict[str, float]  # "bf16" / "fp8" -> dense peak

    @classmethod
    def for_device(cls, key: str | None) -> Roofline | None:
        facts = catalog().get(key or "")
        if not facts or not facts["hbm_tbs"]:
            return None
        return cls(
            key, facts["hbm_tbs"], {"bf16": facts["bf16_tflops"], "fp8": facts["fp8_tflops"]}
        )

    def floor(self, nbytes: float, flops: float, precision: str) -> tuple[float, str]:
        """``(seconds, binding resource)`` of the roofline floor."""
        memory = nbytes / (self.hbm_tbs * 1e12)
        compute = flops / (self.tflops[precision] * 1e12)
        return (memory, "memory") if memory >= compute else (compute, "compute")
