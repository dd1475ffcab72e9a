"""The architectures the check compiles for, as Triton names them, with their limits.

The facts (warp size, shared memory per program, their source) are device facts and
live in ``devices.yaml`` (:func:`pocforge_kernels.devices.archs`); this module only
puts them in the form Triton's compiler takes.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import devices

BACKENDS = {"amd": "hip", "nvidia": "cuda"}  # vendor -> Triton backend


@dataclass(frozen=True)
class Target:
    """One architecture the kit ships configs for, as Triton names it, with its limits."""

    arch: str
    backend: str  # Triton backend: "cuda" or "hip"
    triton_arch: int | str  # compute capability (90) on CUDA, the gfx name on ROCm
    warp_size: int
    shared_limit: int  # bytes of shared memory (LDS) one program may allocate
    source: str

    @classmethod
    def of(cls, arch: devices.Arch) -> Target:
        backend = BACKENDS[arch.vendor]
        triton_arch = int(arch.name.removeprefix("sm")) if backend == "cuda" else arch.name
        return cls(arch.name, backend, triton_arch, arch.warp_size, arch.shared_bytes, arch.source)

    def gpu_target(self):
        """Triton's ``GPUTarget`` for this architecture (imports triton)."""
        from triton.backends.compiler import GPUTarget

        return GPUTarget(self.backend, self.triton_arch, self.warp_size)


TARGETS: dict[str, Target] = {name: Target.of(arch) for name, arch in devices.archs().items()}
