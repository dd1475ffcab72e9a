"""Name the accelerator architecture that launch configs are keyed by.

``gfx942`` (MI300X/MI325X), ``gfx950`` (MI355X), ``sm90`` (H100/H200), ``sm100``
(B200) and so on; ``cpu`` when there is no GPU (the Triton interpreter).  The
environment variable ``POCFORGE_KERNELS_ARCH`` overrides detection, which lets a
laptop resolve the configs a given GPU would get.
"""

from __future__ import annotations

import os
from functools import lru_cache

ARCH_ENV = "POCFORGE_KERNELS_ARCH"


def current_arch(device=None) -> str:
    """The architecture name of ``device`` (a torch device or None for the current one)."""
    override = os.environ.get(ARCH_ENV)
    if override:
        return override
    if device is not None and getattr(device, "type", str(device)) == "cpu":
        return "cpu"
    index = getattr(device, "index", None)
    return _detect(index)


@lru_cache(maxsize=8)
def _detect(index: int | None) -> str:
    import torch

    if not torch.cuda.is_available():
        return "cpu"
    props = torch.cuda.get_device_properties(index if index is not None else 0)
    gcn = getattr(props, "gcnArchName", "")
    if torch.version.hip and gcn:
        # ROCm reports e.g. "gfx942:sramecc+:xnack-"; the features do not change configs.
        return gcn.split(":")[0]
    return f"sm{props.major}{props.minor}"


def device_name(device=None) -> str:
    """A human name for the device, e.g. ``"AMD Instinct MI300X"`` or ``"cpu"``."""
    import torch

    if (device is not None and torch.device(device).type == "cpu") or not torch.cuda.is_available():
        return "cpu"
    return torch.cuda.get_device_name(device)


def num_compute_units(device) -> int:
    """Streaming multiprocessors (CUDA) or compute units (ROCm); CPU cores on the CPU.

    Used to size persistent grids (one program per unit), never as a tuned number.
    """
    import torch

    if torch.device(device).type == "cpu":
        return os.cpu_count() or 1
    return torch.cuda.get_device_properties(device).multi_processor_count
