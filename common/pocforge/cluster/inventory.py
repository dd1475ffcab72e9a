"""From a POC spec to an Ansible inventory and the checks' expectations (a thin layer)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from pocforge.cluster.expectations import ClusterExpectations
from pocforge.cluster.references import collective_references

# scale_out values that carry RDMA traffic; "ethernet" and "none" have no RDMA NICs to check.
_NO_RDMA = {"none", "ethernet", "", None}


def inventory_from_spec(spec: Any, dest: Path) -> Path:
    """The inventory to use for ``spec``: its own file, or one written to ``dest``.

    ``cluster.inventory`` (relative to the POC folder) wins; else ``cluster.hosts`` with
    ``cluster.ssh``; with neither, the controller itself (``localhost``, local connection).
    """
    cluster = spec.cluster
    if getattr(cluster, "inventory", None):
        path = Path(cluster.inventory)
        if not path.is_absolute():
            path = Path(spec.source_dir) / path
        if not path.exists():
            raise FileNotFoundError(f"cluster.inventory: {path} does not exist")
        return path
    ssh = cluster.ssh
    common: dict[str, Any] = {"ansible_python_interpreter": "/usr/bin/python3"}
    hosts: dict[str, dict] = {}
    for host in cluster.hosts or []:
        hosts[host.name] = {"ansible_host": host.address}
    if hosts:
        common["ansible_user"] = ssh.user
        common["ansible_port"] = ssh.port
        # root only where a task needs it (playbooks: `become: pocforge_become`)
        common["pocforge_become"] = ssh.user != "root" if ssh.become is None else ssh.become
        if ssh.key_file:
            common["ansible_ssh_private_key_file"] = str(Path(ssh.key_file).expanduser())
    else:
        hosts["localhost"] = {"ansible_connection": "local"}
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(yaml.safe_dump({"all": {"hosts": hosts, "vars": common}}, sort_keys=False))
    return dest


def _rate_gbps(scale_out: str | None) -> float:
    match = re.search(r"(\d+)g\b", scale_out or "")
    return float(match.group(1)) if match else 0.0


def expectations_from_spec(spec: Any) -> ClusterExpectations:
    """GPU type, count and vendor from the catalog; NICs and rate from the interconnect."""
    from pocforge.catalog import gpu as catalog_gpu

    cluster = spec.cluster
    facts = catalog_gpu(cluster.gpu)
    scale_out = cluster.interconnect.scale_out
    rdma = scale_out not in _NO_RDMA
    return ClusterExpectations(
        gpu_required=facts.is_gpu,
        gpu_vendor=facts.vendor if facts.is_gpu else "none",
        gpu_model=facts.name if facts.is_gpu else "",
        gpus_per_node=cluster.gpus_per_node if facts.is_gpu else 0,
        rdma_nics=cluster.interconnect.nics_per_node if rdma else 0,
        rdma_rate_gbps=_rate_gbps(scale_out) if rdma else 0.0,
        platform=f"{facts.name} {scale_out}".strip(),
        collective_reference=collective_references(facts.name, scale_out),
        extra=_bringup_vars(spec),
    )


def _bringup_vars(spec: Any) -> dict:
    """What bring-up takes from the spec: its runtimes' environments and images
    (``pocforge.runtimes.provision``) and where to stage the weights from."""
    from pocforge.frameworks.base import controller_model
    from pocforge.runtimes.provision import bringup_vars
    from pocforge.spec.model_schema import CONTROLLER

    deployments = (getattr(spec, "serving", None), getattr(spec, "training", None))
    out: dict[str, Any] = bringup_vars(spec) if any(deployments) else {}
    weights = getattr(getattr(spec, "model", None), "weights", None)
    if weights is not None:
        out["model_staging_source"] = weights.source
        if weights.source.startswith(CONTROLLER):  # the folder here, wherever the POC is
            out["model_staging_source"] = CONTROLLER + controller_model(spec)
        out["model_staging_dest"] = weights.dest
        token = getattr(spec.model, "hf_token", None)
        if token is not None and weights.source.startswith("hf://"):
            # a gated model's mirror: the token reaches only the download task (no_log)
            out["model_staging_env"] = {"HF_TOKEN": token.get_secret_value()}
    return out
