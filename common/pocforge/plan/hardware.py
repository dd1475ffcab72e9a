"""The rates a prediction runs at: a GPU's data-sheet peaks times its achievable fractions
(``devices.yaml``), the frameworks' overheads (``calibration.yaml``), and the links
between GPUs inside and across nodes."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

from pocforge.catalog import GPU, gpu

CALIBRATION = Path(__file__).with_name("calibration.yaml")


@cache
def calibration() -> dict:
    return yaml.safe_load(CALIBRATION.read_text())


@dataclass(frozen=True)
class Device:
    """Effective rates of one GPU type in a cluster of ``gpus_per_node``-GPU nodes."""

    gpu: GPU
    gpus_per_node: int

    @classmethod
    def of(cls, name: str, gpus_per_node: int | None = None) -> Device:
        facts = gpu(name)
        return cls(facts, gpus_per_node or facts.gpus_per_node or 1)

    @property
    def is_cpu(self) -> bool:
        return not self.gpu.is_gpu

    @property
    def memory_bytes(self) -> float:
        if self.is_cpu:
            return calibration()["cpu"]["kv_space_gb"] * 1e9
        return self.gpu.hbm_gb * 1e9

    def flops(self, precision: str) -> float:
        """Achievable dense matrix FLOP/s in ``precision`` (fp4 runs at fp8 rate on a GPU
        without fp4 matrix units: the weights are dequantized)."""
        if self.is_cpu:
            return calibration()["cpu"]["tflops"] * 1e12
        peak = self.peak_flops(precision)
        low = precision in ("fp8", "fp4")  # fp4: no published GEMM fraction; fp8's
        return peak * (self.gpu.fp8_matrix_eff if low else self.gpu.matrix_eff)

    def peak_flops(self, precision: str) -> float:
        if self.is_cpu:
            return calibration()["cpu"]["tflops"] * 1e12
        g = self.gpu
        # fp32 GEMMs: TF32/xf32 matrix rates, half of bf16 on both vendors' data sheets
        rate = {
            "fp32": g.bf16_tflops / 2,
            "bf16": g.bf16_tflops,
            "fp8": g.fp8_tflops,
            "fp4": g.fp4_tflops or g.fp8_tflops,
        }
        return rate[precision] * 1e12

    @property
    def mem_bw(self) -> float:
        """Achievable HBM bytes/s."""
        if self.is_cpu:
            return calibration()["cpu"]["mem_tbs"] * 1e12
        return self.gpu.hbm_tbs * 1e12 * self.gpu.hbm_eff

    def link_bw(self, group: int) -> float:
        """Achievable bytes/s per GPU for a collective over ``group`` GPUs: the scale-up
        link inside a node (a full mesh gives each peer link_gbs/(n-1), so a group of
        fewer GPUs than the node uses only its share), the NIC across nodes."""
        if self.is_cpu or group <= 1:
            return float("inf") if group <= 1 else 10e9
        if group > self.gpus_per_node:
            return self.gpu.nic_gbs * 1e9 * self.gpu.link_eff
        link = self.gpu.link_gbs
        if self.gpu.topology == "mesh" and self.gpus_per_node > 1:
            link = link * (group - 1) / (self.gpus_per_node - 1)
        return link * 1e9 * self.gpu.link_eff

    def latency(self, group: int) -> float:
        """Seconds of fixed cost per collective call over ``group`` GPUs."""
        if group <= 1:
            return 0.0
        us = calibration()["collective_latency_us"]
        return (us["inter"] if group > self.gpus_per_node else us["intra"]) * 1e-6

    def all_reduce(self, nbytes: float, group: int) -> float:
        """Ring all-reduce time: 2(n-1)/n of the message over the bus bandwidth."""
        if group <= 1:
            return 0.0
        return self.latency(group) + 2 * (group - 1) / group * nbytes / self.link_bw(group)

    def all_to_all(self, nbytes: float, group: int) -> float:
        """All-to-all of ``nbytes`` per GPU: (n-1)/n of it leaves the GPU."""
        if group <= 1:
            return 0.0
        return self.latency(group) + (group - 1) / group * nbytes / self.link_bw(group)

    def all_gather(self, nbytes: float, group: int) -> float:
        """All-gather (or reduce-scatter) whose result is ``nbytes`` per GPU."""
        if group <= 1:
            return 0.0
        return self.latency(group) + (group - 1) / group * nbytes / self.link_bw(group)

    def send(self, nbytes: float, across_nodes: bool) -> float:
        """A point-to-point transfer (pipeline stages, KV cache to a decode node)."""
        if self.is_cpu:
            return nbytes / 10e9
        us = calibration()["collective_latency_us"]
        if across_nodes:
            return us["inter"] * 1e-6 + nbytes / (self.gpu.nic_gbs * 1e9 * self.gpu.link_eff)
        return us["intra"] * 1e-6 + nbytes / (self.gpu.pair_gbs * 1e9 * self.gpu.link_eff)

    def step_overhead(self, framework: str) -> float:
        if self.is_cpu:
            return calibration()["cpu"]["step_overhead_ms"].get(framework, 25.0) * 1e-3
        return framework_calibration(framework)["step_overhead_ms"] * 1e-3


def serving_calibration() -> dict:
    return calibration()["serving"]


def framework_calibration(framework: str) -> dict:
    known = calibration()["frameworks"]
    return known.get(framework, known["vllm"])
