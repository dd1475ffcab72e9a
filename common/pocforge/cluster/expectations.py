"""What the checks expect of a cluster, independent of where the numbers come from."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from importlib import resources

import yaml


@cache
def _platforms() -> dict:
    text = resources.files("pocforge.cluster").joinpath("data/platforms.yaml").read_text()
    return yaml.safe_load(text) or {}


def platform_facts(gpu: str) -> dict:
    """The ``data/platforms.yaml`` entry of GPU type ``gpu`` with its ``name``, as preflight's
    ``preflight_platform``; ``{}`` for a type without facts (its platform checks then report
    "skipped: no platform facts")."""
    entry = _platforms().get(gpu)
    return {"name": gpu, **entry} if entry else {}


@dataclass(frozen=True)
class ClusterExpectations:
    """Thresholds the kit passes to the playbooks (as extra vars, above group_vars).

    ``gpu_required`` False lets a host without GPUs report its GPU checks as
    ``skipped: no GPU``; True makes them fail. ``rdma_nics`` 0 skips the NIC checks.
    ``platform_facts`` (default: the ``platforms.yaml`` entry of ``gpu_model``) decides the
    per-platform checks: Fabric Manager on NVSwitch baseboards, the kernel arguments the
    platform's tuning guide asks for.
    """

    gpu_required: bool = False
    gpu_vendor: str = "amd"
    gpu_model: str = ""
    gpus_per_node: int = 8
    rdma_nics: int = 0
    rdma_rate_gbps: float = 0.0
    platform: str = ""
    collective_reference: dict = field(default_factory=dict)
    min_busbw_fraction: float = 0.95
    platform_facts: dict | None = None
    extra: dict = field(default_factory=dict)

    def extravars(self) -> dict:
        """Ansible extra vars: role-prefixed names, as in each role's defaults/."""
        facts = self.platform_facts
        out = {
            "preflight_gpu_required": self.gpu_required,
            "preflight_gpu_vendor": self.gpu_vendor,
            "preflight_gpu_model": self.gpu_model,
            "preflight_gpu_count": self.gpus_per_node,
            "preflight_rdma_nics": self.rdma_nics,
            "preflight_rdma_rate_gbps": self.rdma_rate_gbps,
            "preflight_platform": platform_facts(self.gpu_model) if facts is None else facts,
            "collectives_gpu_required": self.gpu_required,
            "collectives_reference": self.collective_reference,
            "collectives_min_fraction": self.min_busbw_fraction,
            "collectives_platform": self.platform,
        }
        out.update(self.extra)
        return out
