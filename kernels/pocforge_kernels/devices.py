"""Hardware facts: the one reader of ``devices.yaml``.

Two tables, parsed once per process: ``gpus`` (one entry per GPU type, from the
vendors' data sheets: memory, bandwidth, dense peaks, scale-up links; the reference
platform's topology and NICs; and the achievable fractions of those peaks that published
measurements reach, the parallel-layout planner's defaults) and
``archs`` (one entry per GPU architecture the kernels ship configs for: warp
size and the shared memory one program may allocate).  The kit's catalog
(``pocforge.catalog``), the kernel roofline (:mod:`.bench.roofline`) and the
compile check's targets (:mod:`.compile_check.targets`) all read them here.

Plain YAML and dataclasses: importing this module imports neither torch nor triton.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

DEVICES_YAML = Path(__file__).resolve().with_name("devices.yaml")


@dataclass(frozen=True)
class Gpu:
    """One GPU type's data-sheet facts (dense peaks, per GPU), its reference platform, and
    the fractions of the peaks that published measurements reach (see devices.yaml)."""

    name: str
    vendor: str  # "amd", "nvidia", or "none" (the CPU entry)
    arch: str  # an entry of archs(), or "cpu"
    platform: str  # the reference platform the topology and NIC facts describe
    hbm_gb: float
    hbm_tbs: float  # peak memory bandwidth, TB/s
    bf16_tflops: float
    fp8_tflops: float
    fp4_tflops: float  # dense FP4 matrix peak; 0 without FP4 matrix units
    link_gbs: float  # GPU-GPU scale-up bandwidth per GPU, one direction, GB/s
    topology: str  # "mesh" (full xGMI mesh), "switch" (NVSwitch), or "none" (the CPU entry)
    gpus_per_node: int  # the reference platform's scale-up domain
    nic_gbs: float  # scale-out bandwidth per GPU on that platform, one direction, GB/s
    fp8_format: str
    matrix_eff: float  # achievable fraction of the dense matrix peak (large BF16 GEMM)
    fp8_matrix_eff: float  # the same for a large FP8 GEMM over fp8_tflops
    hbm_eff: float  # achievable fraction of hbm_tbs (BabelStream Triad)
    link_eff: float  # 8-GPU all-reduce busbw over link_gbs (ring algorithm)
    source: str  # where the peaks come from
    eff_source: str  # where the three fractions come from

    @property
    def is_gpu(self) -> bool:
        return self.vendor != "none"


@dataclass(frozen=True)
class Arch:
    """One GPU architecture's limits, as a kernel launch meets them."""

    name: str  # as launch configs are keyed: "gfx942", "sm90", ...
    vendor: str  # "amd" or "nvidia"
    warp_size: int  # lanes per warp (wavefront)
    shared_kib: float  # shared memory (LDS) one program may allocate
    source: str

    @property
    def shared_bytes(self) -> int:
        return int(self.shared_kib * 1024)


@cache
def _tables() -> tuple[dict[str, Gpu], dict[str, Arch]]:
    raw = yaml.safe_load(DEVICES_YAML.read_text())
    gpus = {name: Gpu(name=name, **facts) for name, facts in raw["gpus"].items()}
    archs = {name: Arch(name=name, **facts) for name, facts in raw["archs"].items()}
    return gpus, archs


def gpus() -> dict[str, Gpu]:
    """Every GPU type by name ("MI300X", "H200", ..., and "cpu"), in file order."""
    return dict(_tables()[0])


def archs() -> dict[str, Arch]:
    """Every GPU architecture by name ("gfx942", "gfx950", "sm90", "sm100"), in file order."""
    return dict(_tables()[1])


def match_gpu(device_name: str) -> str | None:
    """The GPU type named inside a device name ("NVIDIA H100 80GB HBM3" -> "H100"), or None."""
    if device_name == "cpu":
        return "cpu"
    upper = device_name.upper()
    for key in sorted(gpus(), key=len, reverse=True):  # MI325X before a shorter key
        if key != "cpu" and key.upper() in upper:
            return key
    return None
