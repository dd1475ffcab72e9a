"""Kernel benchmarks at model-derived shapes: time, GB/s, TFLOP/s, % of roofline, speed-ups.

Function API (for ``pocforge bench kernels``)::

    from pocforge_kernels.bench import run_benchmarks, print_report
    result = run_benchmarks(["rms_norm", "fused_moe"])   # dict, JSON-ready
    print_report(result)

Command line: ``python -m pocforge_kernels.bench [--op OP ...] [--json OUT]``.
Each op's cases live in its folder's ``bench.py`` (found by :mod:`.registry`; what a case
is: :mod:`.case`), model shapes in ``models.json``, device peaks in ``devices.yaml``
(:mod:`pocforge_kernels.devices`); see ``kernels/BENCHMARKS.md``.  Importing this package
does not import torch.
"""

from __future__ import annotations


def run_benchmarks(*args, **kwargs):
    from .harness import run_benchmarks as run

    return run(*args, **kwargs)


def print_report(*args, **kwargs):
    from .report import print_report as report

    return report(*args, **kwargs)


__all__ = ["print_report", "run_benchmarks"]
