"""``compile_all``: every launch compiled for every target, as one self-describing document."""

from __future__ import annotations

from dataclasses import asdict

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
    archs: list[str] | None = None, ops: list[str] | None = None, dtype=torch.bfloat16
) -> dict:
    """Compile every launch of ``ops`` (default: all) for ``archs`` (default: all targets)."""
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
    session = Session()
    calls = launches(ops, dtype)
    errors = []
    for arch in archs or list(TARGETS):
        with stopped_launches(session, TARGETS[arch]):
            for name, call in calls.items():
                errors += session.compile_case(name, call)
    compiled = {r.kernel for r in session.records}
    missing = sorted(library_kernels() - compiled) if not ops else []
    return {
        "schema": SCHEMA,
        "triton": triton.__version__,
        "torch": torch.__version__,
        "dtype": str(dtype).replace("torch.", ""),
        "targets": {a: asdict(TARGETS[a]) for a in archs or TARGETS},
        "records": [r.as_dict() for r in session.records],
        "configs_checked": sorted(session.configs_checked),
        "errors": errors,
        "not_compiled": missing,
        "ok": not errors and not missing and not any(r.failed for r in session.records),
    }
