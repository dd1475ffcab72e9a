"""The device roofline: peak HBM bandwidth and matrix throughput, from :mod:`pocforge_kernels.devices`.

A kernel's floor time is ``max(bytes / bandwidth, flops / peak)``; whichever
term is larger is the *binding* resource, and the percentage of roofline is
``floor / measured``.  The device facts live in ``devices.yaml``, read only by
:mod:`pocforge_kernels.devices`; this module only does the arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import devices


@dataclass(frozen=True)
class Roofline:
    device: str
    hbm_tbs: float
    tflops: dict[str, float]  # "bf16" / "fp8" -> dense peak

    @classmethod
    def for_device(cls, key: str | None) -> Roofline | None:
        """The roofline of GPU type ``key`` (a :func:`devices.match_gpu` result); None for
        the CPU, an unknown device, or a type without a bandwidth figure."""
        facts = devices.gpus().get(key or "")
        if not facts or not facts.hbm_tbs:
            return None
        return cls(key, facts.hbm_tbs, {"bf16": facts.bf16_tflops, "fp8": facts.fp8_tflops})

    def floor(self, nbytes: float, flops: float, precision: str) -> tuple[float, str]:
        """``(seconds, binding resource)`` of the roofline floor."""
        memory = nbytes / (self.hbm_tbs * 1e12)
        compute = flops / (self.tflops[precision] * 1e12)
        return (memory, "memory") if memory >= compute else (compute, "compute")
