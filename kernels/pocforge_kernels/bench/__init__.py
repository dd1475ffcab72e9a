"""Kernel benchmarks at model-derived shapes: time, GB/s, TFLOP/s, % of roofline, speed-ups.

Function API (for ``pocforge bench kernels``)::

    from pocforge_kernels.bench import run_benchmarks, print_report
    result = run_benchmarks(["rms_norm", "fused_moe"])   # dict, JSON-ready
    print_report(result)

Command line: ``python -m pocforge_kernels.bench [--op OP ...] [--json OUT]``.
Shapes live in ``models.json``, device peaks in ``kernels/pocforge_kernels/devices.yaml``; see
``kernels/BENCHMARKS.md``.  Importing this package does not import torch.
"""

from __future__ import annotations


def run_benchmarks(*args, **kwargs):
    from .harness import run_benchmarks as run

    return run(*args, **kwargs)


def print_report(*args, **kwargs):
    from .report import print_report as report

    return report(*args, **kwargs)


__all__ = ["print_report", "run_benchmarks"]
