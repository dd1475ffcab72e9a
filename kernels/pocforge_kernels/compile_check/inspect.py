"""Read a compiled kernel's resource usage from the compiler's own output.

CUDA: ``cuobjdump --dump-resource-usage`` on the cubin (the ``cuobjdump`` shipped in
Triton's NVIDIA backend).  ROCm: the AMDGPU metadata and comments in the AMDGCN
assembly (``.vgpr_count``, ``.vgpr_spill_count``, ``; ScratchSize``, ``; Occupancy``).
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

from .records import Compiled
from .targets import Target


def _cuobjdump() -> Path | None:
    import triton.backends.nvidia as nvidia

    tool = Path(nvidia.__file__).parent / "bin" / "cuobjdump"
    return tool if tool.exists() else None


def cuda_resources(cubin: bytes) -> dict:
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


def amd_resources(asm: str) -> dict:
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
        res = cuda_resources(compiled.asm["cubin"])
        record.shared_bytes = shared + res.get("SHARED", 0)
        record.registers = res.get("REG")
        record.spill_bytes = res.get("LOCAL")
    else:
        res = amd_resources(compiled.asm["amdgcn"])
        record.shared_bytes = shared
        record.registers = res["vgpr"]
        spilled = res["vgpr_spill"] + res["sgpr_spill"]
        record.spill_bytes = res["scratch"] if spilled else 0
        record.occupancy = res["occupancy"]
    record.shared_limit = target.shared_limit
