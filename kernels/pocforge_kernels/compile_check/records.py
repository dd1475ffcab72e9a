"""What one compiled kernel variant needs on one target, and whether it fits."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class Compiled:
    """One kernel variant compiled for one target: what it needs and whether it fits."""

    arch: str
    kernel: str
    case: str  # the benchmark case or compile variant (op and model) whose launch asked for it
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


def error_text(exc: Exception) -> str:
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
