"""The spec's `cluster:` section: the nodes, their GPUs and interconnect, and how the kit reaches them.

Every field has a description; ``pocs/SPEC.md`` is generated from them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import (
    Field,
    SecretStr,
    field_validator,
    model_validator,
)

from pocforge.catalog import gpu_names
from pocforge.spec.base import NAME_PATTERN, SECRET, Strict


class Interconnect(Strict):
    scale_up: Literal["xgmi", "nvlink", "pcie", "none"] = Field(
        "none", description="GPU-to-GPU link inside a node."
    )
    scale_out: Literal[
        "roce-400g", "roce-200g", "ib-ndr-400g", "ib-xdr-800g", "ib-hdr-200g", "ethernet", "none"
    ] = Field("none", description="Network between nodes.")
    nics_per_node: int = Field(0, ge=0, description="RDMA NICs per node used for collectives.")


class Host(Strict):
    name: str = Field(pattern=NAME_PATTERN, description="Inventory hostname.")
    address: str = Field(min_length=1, description="Address or DNS name to reach it over SSH.")


class Ssh(Strict):
    user: str = Field("root", description="SSH user on the nodes.")
    port: int = Field(22, ge=1, le=65535, description="SSH port.")
    key_file: str | None = Field(
        None, description="Private key file; default: the SSH agent / ~/.ssh."
    )
    password: SecretStr | None = Field(
        None,
        description="SSH password when keys are not possible; use `${ENV}`.",
        json_schema_extra=SECRET,
    )
    become: bool | None = Field(
        None,
        description="Run the few tasks that need root (the kit's folder `/opt/pocforge`, the GPU and PCIe probes, a weights folder outside it) through sudo; default: when `user` is not root. Passwordless sudo, or `ansible_become_password` in the inventory.",
    )
    host_keys: Literal["tofu", "strict", "off"] = Field(
        "tofu",
        description="Checking the nodes' SSH host keys against `known_hosts`: `tofu` trusts a node's key the first time and refuses a changed one; `strict` accepts only keys already in the file; `off` checks nothing (a man in the middle goes unnoticed; the run records and prints that it was off).",
    )
    known_hosts: str = Field(
        "known_hosts",
        description="The POC's known-hosts file (relative to the POC folder): the nodes' keys, recorded at first contact, reviewed like the rest of the POC.",
    )


class Slurm(Strict):
    """The allocation a run takes on a cluster Slurm owns (``cluster.scheduler: slurm``)."""

    partition: str | None = Field(None, description="`--partition`; default: the site's.")
    account: str | None = Field(None, description="`--account` the allocation is charged to.")
    qos: str | None = Field(None, description="`--qos`.")
    reservation: str | None = Field(None, description="`--reservation`.")
    time_limit: str = Field(
        "04:00:00",
        pattern=r"^(\d+-)?\d{1,2}(:\d{2}){1,2}$",
        description="`--time` of the allocation, in Slurm's form (`HH:MM:SS`, `D-HH:MM:SS`).",
    )
    nodelist: list[str] = Field(
        default_factory=list, description="`--nodelist`: these nodes (`cluster.nodes` of them)."
    )
    exclude: list[str] = Field(default_factory=list, description="`--exclude`: never these.")
    exclusive: bool = Field(True, description="`--exclusive`: no other job shares the nodes.")
    pyxis: bool | None = Field(
        None,
        description="Start a container runtime's launches through Slurm's pyxis plugin (`srun --container-image`, the image imported once per node with enroot) instead of the node's docker or podman; default: on NVIDIA GPUs. A venv runtime starts its interpreter in the step.",
    )


class ClusterSpec(Strict):
    gpu: str = Field(
        description="GPU type from the catalog (MI300X, MI325X, MI355X, H100, H200, B200, or `cpu`)."
    )
    nodes: int = Field(1, ge=1, description="Number of nodes.")
    gpus_per_node: int = Field(
        8, ge=1, description="GPUs used on each node (for `cpu`: worker processes)."
    )
    interconnect: Interconnect = Field(
        default_factory=Interconnect, description="Links inside and between nodes."
    )
    inventory: str | None = Field(
        None,
        description="Ansible inventory (relative to the POC folder); default: built from `hosts`.",
    )
    hosts: list[Host] = Field(
        default_factory=list, description="The nodes, when no inventory is given; one per node."
    )
    ssh: Ssh = Field(default_factory=Ssh, description="How Ansible reaches the nodes.")
    scheduler: Literal["ssh", "slurm"] = Field(
        "ssh",
        description="Who starts the processes on the nodes: `ssh`, the kit over SSH; `slurm`, job steps of one Slurm allocation the run takes (`cluster.slurm`).",
    )
    slurm: Slurm | None = Field(
        None, description="The Slurm allocation, for `scheduler: slurm` (default: the site's)."
    )

    @model_validator(mode="after")
    def _slurm_only_with_slurm(self) -> ClusterSpec:
        if self.slurm is not None and self.scheduler != "slurm":
            raise ValueError(
                "cluster.slurm is set but cluster.scheduler is ssh: set scheduler: slurm, or "
                "remove the slurm section"
            )
        if self.scheduler == "slurm" and self.slurm is None:
            self.slurm = Slurm()
        if (
            self.slurm is not None
            and self.slurm.nodelist
            and len(self.slurm.nodelist) != self.nodes
        ):
            raise ValueError(
                f"cluster.slurm.nodelist names {len(self.slurm.nodelist)} nodes but "
                f"cluster.nodes is {self.nodes}: name one per node, or none"
            )
        return self

    @field_validator("gpu")
    @classmethod
    def _known_gpu(cls, value: str) -> str:
        if value not in gpu_names():
            raise ValueError(f"unknown GPU type {value!r} (allowed: {', '.join(gpu_names())})")
        return value

    @property
    def total_gpus(self) -> int:
        return self.nodes * self.gpus_per_node
