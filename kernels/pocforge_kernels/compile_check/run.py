"""``compile_all``: every launch compiled for every target, as one self-describing document."""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from itertools import repeat

import torch
import triton

from .. import backend
from ..bench.registry import cases
from .intercept import stopped_launches
from .launches import launches, library_kernels
from .session import Session
from .targets import TARGETS

SCHEMA = "pocforge_kernels.compile_check/1"  # was "pocforge_kernels.aot/1", same fields


def compile_all(
    archs: list[str] | None = None,
    ops: list[str] | None = None,
    dtype=torch.bfloat16,
    jobs: int | None = None,
) -> dict:
    """Compile every launch of ``ops`` (default: all) for ``archs`` (default: all targets),
    the targets in ``jobs`` processes at once (default: one per core this process may use)."""
    if backend.interpreting():
        raise RuntimeError(
            "the compile check needs Triton's compiler: unset TRITON_INTERPRET (the interpreter "
            "replaces it)"
        )
    unknown = sorted(set(archs or ()) - set(TARGETS))
    if unknown:
        raise ValueError(f"unknown arch(s) {unknown}; known: {', '.join(TARGETS)}")
    known = set(cases())
    if set(ops or ()) - known:
        raise ValueError(
            f"unknown op(s) {sorted(set(ops) - known)}; known: {', '.join(sorted(known))}"
        )
    chosen = list(archs or TARGETS)
    jobs = min(len(chosen), jobs or len(os.sched_getaffinity(0)))
    if jobs > 1:  # one arch per process: Triton's compiler holds one core per compile
        spawn = multiprocessing.get_context("spawn")  # no fork after torch's threads
        with ProcessPoolExecutor(jobs, mp_context=spawn) as pool:
            parts = list(pool.map(_compile_arch, chosen, repeat(ops), repeat(dtype)))
    else:
        parts = [_compile_arch(arch, ops, dtype) for arch in chosen]
    records = [record for part in parts for record in part["records"]]
    errors = [error for part in parts for error in part["errors"]]
    checked = {entry for part in parts for entry in part["configs_checked"]}
    compiled = {r["kernel"] for r in records}
    missing = sorted(library_kernels() - compiled) if not ops else []
    return {
        "schema": SCHEMA,
        "triton": triton.__version__,
        "torch": torch.__version__,
        "dtype": str(dtype).replace("torch.", ""),
        "targets": {a: asdict(TARGETS[a]) for a in chosen},
        "records": records,
        "configs_checked": sorted(checked),
        "errors": errors,
        "not_compiled": missing,
        "ok": not errors and not missing and not any(part["failed"] for part in parts),
    }


def _compile_arch(arch: str, ops: list[str] | None, dtype) -> dict:
    """Every launch of ``ops`` compiled for ``arch``, in this process: its records, the
    config entries it ran under and what failed outside the compiler."""
    session = Session()
    errors = []
    calls = launches(ops, dtype)
    with stopped_launches(session, TARGETS[arch]):
        for name, call in calls.items():
            errors += session.compile_case(name, call)
    return {
        "records": [r.as_dict() for r in session.records],
        "failed": any(r.failed for r in session.records),
        "configs_checked": sorted(session.configs_checked),
        "errors": errors,
    }
