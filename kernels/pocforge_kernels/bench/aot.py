"""Compile every kernel the kit launches for real GPU targets, on any machine, GPU or not.

Triton needs no GPU to compile: its front end, LLVM, the ``ptxas`` that ships
in the wheel (CUDA) and the linker built into it (ROCm) turn a kernel into the
same cubin or hsaco a GPU would load.  What needs the GPU is only the launch.
This module runs the benchmark cases (:mod:`.cases`, at the GPU workload's
model shapes) with Triton's launch path intact up to the compiler and stopped
right after it, once per target architecture, so each kernel is compiled with
exactly the constexprs, dtypes, ``num_warps`` and ``num_stages`` its launcher
picks for that architecture from ``configs/<arch>.json``.  Every bucket of
every config file is compiled, not only the one the benchmark shape selects.

What it checks, which the CPU interpreter cannot:

* the kernel compiles for the target (types, layouts, ``tl.dot`` shapes and
  fp8 formats the interpreter accepts but a backend refuses);
* its shared memory (LDS on AMD) fits one program's limit on that target;
  over the limit, the launch would fail with "out of resource";
* registers do not spill (reported, not failed: a spill is slow, not wrong);
* every ``@triton.jit`` kernel of the library is compiled at least once.

It says nothing about speed.  Run ``python -m pocforge_kernels.bench.aot``;
without ``TRITON_INTERPRET`` (the interpreter replaces the compiler).
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import os
import re
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import triton
import triton.compiler
from triton.backends.compiler import GPUTarget
from triton.runtime.driver import driver
from triton.runtime.jit import KernelInterface

from .. import OPS, backend, config, load
from ..arch import ARCH_ENV
from . import cases

SCHEMA = "pocforge_kernels.aot/1"


@dataclass(frozen=True)
class Target:
    """One architecture the kit ships configs for, as Triton names it, with its limits."""

    arch: str
    backend: str  # Triton backend: "cuda" or "hip"
    triton_arch: int | str
    warp_size: int
    shared_limit: int  # bytes of shared memory (LDS) one program may allocate
    source: str

    def gpu_target(self) -> GPUTarget:
        return GPUTarget(self.backend, self.triton_arch, self.warp_size)


TARGETS: dict[str, Target] = {
    t.arch: t
    for t in (
        Target(
            arch="gfx942",
            backend="hip",
            triton_arch="gfx942",
            warp_size=64,
            shared_limit=64 * 1024,
            source="AMD CDNA3 ISA: 64 KiB of LDS per compute unit (MI300X, MI325X)",
        ),
        Target(
            arch="gfx950",
            backend="hip",
            triton_arch="gfx950",
            warp_size=64,
            shared_limit=160 * 1024,
            source="AMD CDNA4 ISA: 160 KiB of LDS per compute unit (MI355X)",
        ),
        Target(
            arch="sm90",
            backend="cuda",
            triton_arch=90,
            warp_size=32,
            shared_limit=227 * 1024,
            source="CUDA C++ Programming Guide, compute capability 9.0: 227 KB per block (H100, H200)",
        ),
        Target(
            arch="sm100",
            backend="cuda",
            triton_arch=100,
            warp_size=32,
            shared_limit=227 * 1024,
            source="CUDA C++ Programming Guide, compute capability 10.0: 227 KB per block (B200)",
        ),
    )
}


@dataclass
class Compiled:
    """One kernel variant compiled for one target: what it needs and whether it fits."""

    arch: str
    kernel: str
    case: str  # the benchmark case (op and model) whose launch asked for it
    config: str  # the config files and buckets the launcher looked up: "op/arch.json[bucket]"
    num_warps: int
    num_stages: int
    seconds: float
    shared_bytes: int | None = None
    shared_limit: int | None = None
    registers: int | None = None  # per thread (CUDA) or VGPRs per lane (AMD)
    spill_bytes: int | None = None  # local memory (CUDA) or scratch (AMD) per thread
    occupancy: int | None = None  # waves per SIMD, as the AMD compiler reports it
    error: str | None = None

    @property
    def status(self) -> str:
        if self.error:
            return "compile error"
        if self.shared_bytes is not None and self.shared_bytes > self.shared_limit:
            return "over shared limit"
        if self.spill_bytes:
            return "spills"
        return "ok"

    @property
    def failed(self) -> bool:
        return self.status in ("compile error", "over shared limit")

    def as_dict(self) -> dict:
        return asdict(self) | {"status": self.status}


# -- inspecting a compiled kernel ------------------------------------------------------------


def _cuobjdump() -> Path | None:
    import triton.backends.nvidia as nvidia

    tool = Path(nvidia.__file__).parent / "bin" / "cuobjdump"
    return tool if tool.exists() else None


def _cuda_resources(cubin: bytes) -> dict:
    """Registers, static shared and local (spill) bytes from ``cuobjdump --dump-resource-usage``."""
    tool = _cuobjdump()
    if tool is None:
        return {}
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        out = subprocess.run(
            [str(tool), "--dump-resource-usage", f.name],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
    fields = dict(re.findall(r"\b(REG|SHARED|LOCAL|STACK):(\d+)", out))
    return {k: int(v) for k, v in fields.items()}


def _amd_resources(asm: str) -> dict:
    """VGPRs, spills, scratch and occupancy from the AMDGCN assembly's metadata."""

    def field(pattern: str) -> int | None:
        found = re.search(pattern, asm)
        return int(found.group(1)) if found else None

    return {
        "vgpr": field(r"\.vgpr_count:\s+(\d+)"),
        "vgpr_spill": field(r"\.vgpr_spill_count:\s+(\d+)") or 0,
        "sgpr_spill": field(r"\.sgpr_spill_count:\s+(\d+)") or 0,
        "scratch": field(r"; ScratchSize: (\d+)") or 0,
        "occupancy": field(r"; Occupancy: (\d+)"),
    }


def inspect(compiled, target: Target, record: Compiled) -> None:
    """Fill ``record``'s resource fields from a ``triton.compile`` result."""
    shared = int(compiled.metadata.shared)
    if target.backend == "cuda":
        res = _cuda_resources(compiled.asm["cubin"])
        record.shared_bytes = shared + res.get("SHARED", 0)
        record.registers = res.get("REG")
        record.spill_bytes = res.get("LOCAL")
    else:
        res = _amd_resources(compiled.asm["amdgcn"])
        record.shared_bytes = shared
        record.registers = res["vgpr"]
        spilled = res["vgpr_spill"] + res["sgpr_spill"]
        record.spill_bytes = res["scratch"] if spilled else 0
        record.occupancy = res["occupancy"]
    record.shared_limit = target.shared_limit


def _error_text(exc: Exception) -> str:
    """Triton's compile errors quote the source, then a caret, then (or in their cause) the
    reason: keep the location, the offending line and the reason."""
    lines = [line for line in str(exc).splitlines() if line.strip()]
    root = exc
    while root.__cause__ is not None:  # nested jit calls wrap the reason once per level
        root = root.__cause__
    root_lines = [line.strip() for line in str(root).splitlines() if line.strip() not in ("", "^")]
    reason = root_lines[-1] if root_lines else type(root).__name__
    if root is exc and lines and lines[-1].strip() != "^":
        lines.pop()
    if lines and lines[-1].strip() == "^":
        lines.pop()
    where = f"{lines[0]} {lines[-1].strip()}" if len(lines) > 1 else " ".join(lines)
    text = f"{type(exc).__name__}: {where}" + (f" -> {reason.splitlines()[0]}" if reason else "")
    return text[:500]


# -- stopping Triton's launch path after the compiler -----------------------------------------


class _CompileOnlyDriver:
    """The part of a Triton driver ``JITFunction.run`` asks for before it compiles.

    Each target gets its own device number, so the per-device caches Triton keeps
    in every kernel never mix two architectures' binaries.
    """

    def __init__(self, target: GPUTarget, device: int):
        self.target, self.device = target, device

    def get_current_target(self) -> GPUTarget:
        return self.target

    def get_current_device(self) -> int:
        return self.device

    def get_current_stream(self, device=None) -> int:
        return 0


class _NotLaunched:
    """Stands in for the compiled kernel at launch: nothing runs on any device.

    Integer tensors handed to the kernel are zeroed, because host code after a
    launch may index with a kernel's integer output (fused MoE sorts the expert
    ids routing wrote); zero keeps that in range.  Values mean nothing here.
    """

    function = packed_metadata = None

    def launch_metadata(self, *args):
        return None

    def run(self, *args):
        for arg in args:
            if isinstance(arg, torch.Tensor) and not arg.dtype.is_floating_point:
                arg.zero_()


def _empty(*shape, device, dtype=None, scale: float = 1.0) -> torch.Tensor:
    return torch.empty(*shape, device=device, dtype=dtype)


class Session:
    """Collects :class:`Compiled` records while the cases run with launches stopped."""

    def __init__(self):
        self.records: list[Compiled] = []
        self.target: Target | None = None
        self.case = ""
        self.consulted: list[str] = []  # config files and buckets this call has looked up
        # Every (arch, config file[bucket]) some launch ran under.  Two buckets with the same
        # parameters compile to one variant (Triton caches it), so records alone undercount.
        self.configs_checked: set[str] = set()
        self.forced: tuple[str, str] | None = None  # (config op, bucket) every lookup returns
        self.natural: dict[str, str] = {}  # config op -> the bucket the case's shape selected

    def _compile(self, src, target=None, options=None, **kwargs):
        options = options or {}
        record = Compiled(
            arch=self.target.arch,
            kernel=getattr(src, "name", None) or src.fn.__name__,
            case=self.case,
            config=", ".join(self.consulted) or "-",
            num_warps=options.get("num_warps", 4),
            num_stages=options.get("num_stages", 3),
            seconds=0.0,
        )
        start = time.perf_counter()
        try:
            compiled = _REAL_COMPILE(src, target=target, options=options, **kwargs)
            inspect(compiled, self.target, record)
        except Exception as exc:  # reported in the table, never raised
            record.error = _error_text(exc)
        record.seconds = round(time.perf_counter() - start, 3)
        self.records.append(record)
        return _NotLaunched()

    def _launch_config(self, op, size, device=None, arch=None):
        table = config.load_table(op, self.target.arch)
        forced = self.forced and self.forced[0] == op
        bucket = self.forced[1] if forced else config.choose_bucket(table, size)
        self.natural.setdefault(op, bucket)
        path = config.config_path(op, self.target.arch)
        shipped = path.is_relative_to(config.KERNELS_ROOT)
        used = f"{path.relative_to(config.KERNELS_ROOT) if shipped else path}[{bucket}]"
        if used not in self.consulted:
            self.consulted.append(used)
        self.configs_checked.add(f"{self.target.arch} {used}")
        return dict(table["configs"][bucket])

    def compile_case(self, name: str, call) -> list[str]:
        """Run ``call`` at the configs its shape selects, then once per other bucket of each
        config file it consulted; returns what failed outside the compiler."""
        self.case, self.natural = name, {}
        error = self._run(call, None)
        if error:  # the shape itself fails: forcing buckets would repeat it
            return [error]
        errors = []
        for op, natural in list(self.natural.items()):  # a forced run may consult more
            for bucket in config.load_table(op, self.target.arch)["configs"]:
                if bucket != natural and (error := self._run(call, (op, bucket))):
                    errors.append(error)
        self.forced = None
        return errors

    def _run(self, call, forced: tuple[str, str] | None) -> str | None:
        self.forced, self.consulted = forced, []
        try:
            call()
        except Exception as exc:
            where = f" {forced[0]}/{forced[1]}" if forced else ""
            return f"{self.target.arch} {self.case}{where}: {type(exc).__name__}: {exc}"[:400]
        return None

    @contextlib.contextmanager
    def stopped_launches(self, target: Target, device: int):
        """Launches compile for ``target`` and stop there; configs resolve for its arch."""
        global _ACTIVE
        saved = (triton.compiler.compile, config.launch_config, cases.randn)
        saved_arch, saved_driver = os.environ.get(ARCH_ENV), driver._active
        self.target = target
        _ACTIVE = self
        triton.compiler.compile = _compile_in_active_session
        config.launch_config = self._launch_config
        cases.randn = _empty
        backend.CHECK_DEVICE = False
        os.environ[ARCH_ENV] = target.arch
        driver.set_active(_CompileOnlyDriver(target.gpu_target(), device))
        try:
            yield
        finally:
            driver._active, _ACTIVE = saved_driver, None
            triton.compiler.compile, config.launch_config, cases.randn = saved
            backend.CHECK_DEVICE = True
            if saved_arch is None:
                os.environ.pop(ARCH_ENV, None)
            else:
                os.environ[ARCH_ENV] = saved_arch


_REAL_COMPILE = triton.compiler.compile
_ACTIVE: Session | None = None
# Device numbers never repeat in a process: Triton keeps a cache per kernel and device, which
# must not hand one session's stand-ins to the next.
_DEVICE_NUMBERS = itertools.count(1)


def _compile_in_active_session(src, target=None, options=None, **kwargs):
    """What ``triton.compiler.compile`` is during a session.  Triton binds the compile
    function once per kernel and device, so this indirection, not a session's bound
    method, is what it keeps."""
    return _ACTIVE._compile(src, target=target, options=options, **kwargs)


# -- what gets compiled -----------------------------------------------------------------------


def _extra_calls(models: dict, work: dict, device, dtype) -> dict[str, callable]:
    """Launches the benchmark cases do not make: backward kernels, and the variants the
    frameworks use that compile differently (residual RMSNorm, GPT-J RoPE, tanh GELU,
    non-causal prefill, 32-token KV blocks)."""
    m = models["llama-3-8b"]
    t, h, i = work["decode_batch"], m["hidden_size"], m["intermediate_size"]
    hq, hk, d = m["num_attention_heads"], m["num_key_value_heads"], m["head_dim"]

    def empty(*shape, grad=False):
        return torch.empty(*shape, device=device, dtype=dtype, requires_grad=grad)

    def rms_norm_backward():
        x, w = empty(t, h, grad=True), empty(h, grad=True)
        load("rms_norm")(x, w, 1e-6).backward(empty(t, h))

    def fused_add_rms_norm():
        load("rms_norm")(empty(t, h), empty(h), 1e-6, residual=empty(t, h))

    def act_and_mul(name, **kwargs):
        def call():
            x = empty(t, 2 * i, grad=True)
            load(name)(x, **kwargs).backward(empty(t, i))

        return call

    def rotary_gptj():
        positions = torch.zeros(t, dtype=torch.long, device=device)
        load("rotary_embedding")(
            positions, empty(t, hq * d), empty(t, hk * d), d, empty(4096, d), False
        )

    def prefill_not_causal():
        n = work["prefill_tokens"]
        cu = torch.tensor([0, n], dtype=torch.int32, device=device)
        load("flash_attention_prefill")(
            empty(n, hq, d), empty(n, hk, d), empty(n, hk, d), cu, n, None, False
        )

    def paged_block_32():
        b, ctx = t, work["context_len"]
        blocks = -(-ctx // 32)
        cache = (empty(b * blocks, 32, hk, d) for _ in range(2))
        tables = torch.zeros(b, blocks, dtype=torch.int32, device=device)
        lens = torch.full((b,), ctx, dtype=torch.int32, device=device)
        load("paged_attention_decode")(empty(b, hq, d), *cache, tables, lens, ctx, d**-0.5)

    return {
        "rms_norm backward (llama-3-8b)": rms_norm_backward,
        "rms_norm with residual (llama-3-8b)": fused_add_rms_norm,
        "rotary_embedding GPT-J style (llama-3-8b)": rotary_gptj,
        "silu_and_mul backward (llama-3-8b)": act_and_mul("silu_and_mul"),
        "gelu_and_mul fwd+bwd (llama-3-8b)": act_and_mul("gelu_and_mul"),
        "gelu_and_mul tanh fwd+bwd (llama-3-8b)": act_and_mul("gelu_and_mul", approximate="tanh"),
        "flash_attention_prefill not causal (llama-3-8b)": prefill_not_causal,
        "paged_attention_decode 32-token blocks (llama-3-8b)": paged_block_32,
    }


def _calls(ops: list[str] | None, dtype) -> dict[str, callable]:
    """Every launch to compile, by name: the GPU benchmark cases plus :func:`_extra_calls`."""
    from .harness import load_models

    spec = load_models()
    work, device = spec["workloads"]["gpu"], torch.device("cpu")
    calls = {}
    for op, models in spec["ops"].items():
        if ops and op not in ops:
            continue
        for model in models:
            build = cases.BUILDERS[op]
            calls[f"{op} ({model})"] = _deferred(build, spec["models"][model], work, device, dtype)
    for name, call in _extra_calls(spec["models"], work, device, dtype).items():
        if not ops or name.split()[0] in ops:
            calls[name] = call
    return calls


def _deferred(build, model, work, device, dtype):
    def call():
        build(model, work, device, dtype).kernel()

    return call


def library_kernels() -> set[str]:
    """Names of the ``@triton.jit`` kernels the library launches (``*_kernel`` in kernel.py)."""
    names = set()
    for folder in sorted({target.split(":")[0] for target in OPS.values()}):
        module = importlib.import_module(f"pocforge_kernels.{folder}.kernel")
        for name, value in vars(module).items():
            if isinstance(value, KernelInterface) and name.endswith("_kernel"):
                names.add(name)
    return names


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
    known = set(cases.BUILDERS) | {"gelu_and_mul"}
    if set(ops or ()) - known:
        raise ValueError(
            f"unknown op(s) {sorted(set(ops) - known)}; known: {', '.join(sorted(known))}"
        )
    session = Session()
    calls = _calls(ops, dtype)
    errors = []
    for arch in archs or list(TARGETS):
        device = next(_DEVICE_NUMBERS)
        target = TARGETS[arch]
        with session.stopped_launches(target, device):
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


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json
    import sys

    parser = argparse.ArgumentParser(
        prog="python -m pocforge_kernels.bench.aot",
        description="Compile every kernel launch for real GPU targets (no GPU needed).",
    )
    parser.add_argument("--arch", action="append", dest="archs", choices=sorted(TARGETS))
    parser.add_argument("--op", action="append", dest="ops", metavar="OP")
    # fp32 is left out: DeepSeek-V3's expert weights alone would be 30 GB of address space.
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16"])
    parser.add_argument("--all", action="store_true", help="print every compiled variant")
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write the result here")
    parser.add_argument("--markdown", action="store_true", help="print the summary as Markdown")
    args = parser.parse_args(argv)
    try:
        result = compile_all(args.archs, args.ops, getattr(torch, args.dtype))
    except (RuntimeError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from .report import compile_markdown, print_compile_report

    if args.markdown:
        print(compile_markdown(result), end="")
    else:
        print_compile_report(result, every_variant=args.all)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
