"""Each node's platform environment, derived from the spec, the catalog and bring-up's facts.

What the framework on a node needs to see of its platform, one rule per variable (each with
its source), from ``host_facts`` (the facts bring-up recorded for the host,
``pocforge.cluster.events.HostResult.facts``: ``host_facts_data`` from
``roles/host_facts/files/probe_host.py``, ``rdma_nics_data`` from
``roles/rdma_nics/files/probe_rdma.py``, ``ansible`` from the setup module):

- **Device visibility.** AMD: ``HIP_VISIBLE_DEVICES=0,…,gpus_per_node-1`` ("device indices
  exposed to HIP applications", ROCm's GPU isolation page and HIP environment variables,
  rocm.docs.amd.com/projects/HIP/en/latest/reference/env_variables.html); NVIDIA:
  ``CUDA_VISIBLE_DEVICES`` likewise. The vendor is the catalog's (``pocforge.catalog.gpu``);
  ``cpu`` sets nothing.
- **NCCL_IB_HCA** (scale_out ``ib-*`` or ``roce-*`` on a GPU cluster): the ports bring-up saw
  ``ACTIVE`` whose link layer is the fabric's (InfiniBand for ``ib-*``, Ethernet for
  ``roce-*``), as ``=mlx5_0:1,mlx5_1:1``: NCCL's environment-variable page
  (docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html) reads a leading ``=`` as exact
  names and ``:<port>`` as the port, where a bare ``mlx5_1`` would also match ``mlx5_10``. RCCL
  reads the same NCCL_* variables (RCCL environment variables,
  rocm.docs.amd.com/projects/rccl/en/latest/api-reference/env-variables.html). No such port
  on the host is an error naming it.
- **NCCL_IB_GID_INDEX** (``roce-*`` only): the index of the RoCE v2 GID holding an IPv4-mapped
  address (``::ffff:a.b.c.d``), the entry show_gids lists with an IPv4 and ``v2`` (NCCL's page:
  "The NCCL_IB_GID_INDEX variable defines the Global ID index used in RoCE mode. See the
  InfiniBand show_gids command in order to set this value"). The lowest such index of each
  port; the variable is one number for all ports, so ports that disagree, or a port with no
  IPv4 RoCE v2 GID (Broadcom Thor-2 ports with IPv6-only tables, uccl-project/uccl PR #803),
  are errors naming the host, the ports and the indices there are. InfiniBand ports are
  addressed by LID: no index.
- **NCCL_SOCKET_IFNAME** (GPU clusters): ``=<interface>`` holding the node's inventory address,
  for NCCL's bootstrap and socket traffic (NCCL's page: "=eth0 : Use only interface eth0").
  An address no interface holds, or a DNS name, falls back to the interface of the default
  route (``ansible.default_ipv4.interface``); a loopback address, or no interface facts,
  leaves it to NCCL's own choice (said in the provenance).
- **UCX_NET_DEVICES** (a disaggregated deployment whose KV moves by NIXL over the RDMA
  fabric: vLLM's ``NixlConnector``, the default on GPUs, or SGLang's ``nixl`` backend): the
  same ports as ``mlx5_0:1,mlx5_1:1``. vLLM's NixlConnector usage guide: "When using UCX as
  the transport backend, NCCL environment variables (like NCCL_IB_HCA, NCCL_SOCKET_IFNAME)
  are not applicable to NixlConnector, so configure UCX-specific environment variables";
  its example names the devices in this form.
- **Framework switches** (serving): ``serving.platform.aiter`` → ``VLLM_ROCM_USE_AITER=1/0``
  (vLLM's parent switch for its AITER kernels, ``vllm/envs.py``: "1"/"true" enable).
- **The POC wins.** ``<deployment>.runtime.env`` replaces any derived value; a derivation whose
  variable the POC sets raises nothing (the POC engineer has overridden it). With the POC's
  own ``NCCL_IB_HCA`` the GID index is not derived (which ports it names is the POC's).

:func:`node_env` and :func:`platform_env` give the variables; :func:`node_env_provenance` and
:func:`platform_env_provenance` say, per variable, the value and the fact it came from.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

from pocforge.catalog import gpu as catalog_gpu
from pocforge.runtimes.secrets import split_env
from pocforge.spec import PocSpec

FABRIC_LINK_LAYER = {"ib": "InfiniBand", "roce": "Ethernet"}


class PlatformEnvError(ValueError):
    """A platform variable cannot be derived from the host's facts; names the host and fix."""

    def __init__(self, variable: str, message: str):
        super().__init__(message)
        self.variable = variable


@dataclass(frozen=True)
class Derived:
    """One variable: its value (None: not derived, ``source`` says why) and where it came from."""

    name: str
    value: str | None
    source: str


def _deployment(spec: PocSpec, deployment: str | None) -> str | None:
    if deployment is not None:
        return deployment
    if spec.serving is not None:
        return "serving"
    return "training" if spec.training is not None else None


def _poc_env(spec: PocSpec, deployment: str | None) -> dict[str, str]:
    section = getattr(spec, deployment) if deployment else None
    # a secret passed by reference is no variable's value here (pocforge.runtimes.secrets)
    return split_env(section.runtime.env)[0] if section is not None else {}


def _fabric(scale_out: str) -> str | None:
    """The RDMA link layer a scale_out value names (None: no RDMA)."""
    return FABRIC_LINK_LAYER.get(scale_out.split("-", 1)[0])


def _visibility(spec: PocSpec) -> list[Derived]:
    facts = catalog_gpu(spec.cluster.gpu)
    if not facts.is_gpu:
        return []
    name = "HIP_VISIBLE_DEVICES" if facts.vendor == "amd" else "CUDA_VISIBLE_DEVICES"
    count = spec.cluster.gpus_per_node
    return [
        Derived(
            name,
            ",".join(str(i) for i in range(count)),
            f"catalog: {facts.name} is {facts.vendor}; cluster.gpus_per_node = {count}",
        )
    ]


def _ports(
    host: str, facts: dict, link_layer: str, scale_out: str, where: str
) -> list[tuple[str, dict]]:
    """(device, port) of the ACTIVE ports on the fabric's link layer; raise if there are none."""
    rdma = facts.get("rdma_nics_data")
    if not rdma:
        raise PlatformEnvError(
            "NCCL_IB_HCA",
            f"{host}: bring-up recorded no rdma_nics_data (the rdma_nics role did not report) "
            f"and scale_out is {scale_out}; run bring-up, or set NCCL_IB_HCA in {where}",
        )
    seen, chosen = [], []
    for dev in rdma.get("devices") or []:
        for port in dev.get("ports") or []:
            seen.append(
                f"{dev.get('name')} port {port.get('port')} {port.get('state')} "
                f"{port.get('link_layer')}"
            )
            if port.get("state") == "ACTIVE" and port.get("link_layer") == link_layer:
                chosen.append((dev["name"], port))
    if not chosen:
        raise PlatformEnvError(
            "NCCL_IB_HCA",
            f"{host}: no RDMA port is ACTIVE with link layer {link_layer} (scale_out "
            f"{scale_out}); found: {'; '.join(seen) or 'no RDMA device'}; bring the ports up "
            f"(bring-up's rdma_nics checks) or set NCCL_IB_HCA in {where}",
        )
    return chosen


def _hca(host: str, ports: list[tuple[str, dict]]) -> Derived:
    names = [f"{dev}:{port['port']}" for dev, port in ports]
    return Derived(
        "NCCL_IB_HCA",
        "=" + ",".join(names),
        f"{host}: rdma_nics_data, ports ACTIVE with link layer {ports[0][1]['link_layer']}: "
        + ", ".join(names),
    )


def _ipv4_v2(port: dict) -> list[int]:
    return sorted(
        g["index"] for g in port.get("gids") or [] if g.get("type") == "RoCE v2" and g.get("ipv4")
    )


def _ipv6_v2(port: dict) -> list[int]:
    """RoCE v2 GIDs with a routable (not link-local) IPv6 address: what a POC could name."""
    return sorted(
        g["index"]
        for g in port.get("gids") or []
        if g.get("type") == "RoCE v2"
        and not g.get("ipv4")
        and not str(g.get("gid", "")).lower().startswith("fe80:")
    )


def _gid_index(host: str, ports: list[tuple[str, dict]], where: str) -> Derived:
    indices: dict[str, int] = {}
    missing: list[str] = []
    for dev, port in ports:
        found = _ipv4_v2(port)
        if found:
            indices[f"{dev}:{port['port']}"] = found[0]
        else:
            ipv6 = _ipv6_v2(port)
            hint = f" (RoCE v2 IPv6 GIDs at {', '.join(map(str, ipv6))})" if ipv6 else ""
            missing.append(f"{dev}:{port['port']}{hint}")
    if missing:
        raise PlatformEnvError(
            "NCCL_IB_GID_INDEX",
            f"{host}: no RoCE v2 GID with an IPv4 address on {', '.join(missing)}; give the "
            f"port's interface an IPv4 address, or set NCCL_IB_GID_INDEX in {where}",
        )
    if len(set(indices.values())) > 1:
        listed = ", ".join(f"{name} at {index}" for name, index in indices.items())
        raise PlatformEnvError(
            "NCCL_IB_GID_INDEX",
            f"{host}: the RoCE v2 IPv4 GIDs are at different indices ({listed}) and "
            f"NCCL_IB_GID_INDEX is one number for all ports; set it (or NCCL_IB_HCA) in {where}",
        )
    index = next(iter(indices.values()))
    return Derived(
        "NCCL_IB_GID_INDEX",
        str(index),
        f"{host}: rdma_nics_data, RoCE v2 GID with an IPv4 address at index {index} on "
        + ", ".join(indices),
    )


def _socket_ifname(host: str, facts: dict, address: str | None) -> Derived:
    name = "NCCL_SOCKET_IFNAME"
    interfaces = (facts.get("host_facts_data") or {}).get("interfaces")
    default = ((facts.get("ansible") or {}).get("default_ipv4") or {}).get("interface")
    try:
        ip = ipaddress.ip_address(address) if address else None
    except ValueError:
        ip = None
    if ip is not None and ip.is_loopback:
        return Derived(name, None, f"{host}: inventory address {address} is loopback; NCCL chooses")
    if ip is not None and interfaces:
        for iface in interfaces:
            if any(ipaddress.ip_interface(cidr).ip == ip for cidr in iface.get("ipv4") or []):
                return Derived(
                    name,
                    f"={iface['name']}",
                    f"{host}: host_facts_data.interfaces, {iface['name']} holds the inventory "
                    f"address {address}",
                )
    if default:
        why = (
            f"no interface holds the inventory address {address}"
            if ip is not None
            else f"the inventory address {address or '(none)'} is not an IP address"
        )
        return Derived(name, f"={default}", f"{host}: ansible default_ipv4.interface ({why})")
    if not address:
        return Derived(name, None, f"{host}: no inventory address given; NCCL chooses")
    return Derived(name, None, f"{host}: no interface in the facts holds {address}; NCCL chooses")


def _moves_kv_by_nixl(spec: PocSpec, deployment: str | None) -> bool:
    """A disaggregated serving deployment whose KV cache travels by NIXL (over UCX)."""
    disagg = spec.serving.disaggregation if spec.serving else None
    if deployment != "serving" or disagg is None:
        return False
    if spec.serving.framework == "vllm":
        return (disagg.connector or "NixlConnector") == "NixlConnector"
    return disagg.transfer_backend == "nixl"


def _ucx_devices(host: str, ports: list[tuple[str, dict]]) -> Derived:
    names = [f"{dev}:{port['port']}" for dev, port in ports]
    return Derived(
        "UCX_NET_DEVICES",
        ",".join(names),
        f"{host}: NIXL moves the KV cache over UCX, which reads no NCCL_* variable: the "
        f"ports of NCCL_IB_HCA, {', '.join(names)}",
    )


def _switches(spec: PocSpec, deployment: str | None) -> list[Derived]:
    if deployment != "serving" or spec.serving is None or spec.serving.platform is None:
        return []
    aiter = spec.serving.platform.aiter
    if aiter is None:
        return []
    return [Derived("VLLM_ROCM_USE_AITER", "1" if aiter else "0", "serving.platform.aiter")]


def derive(
    spec: PocSpec,
    host_facts: dict[str, Any],
    *,
    host: str = "",
    address: str | None = None,
    deployment: str | None = None,
) -> list[Derived]:
    """Every derived variable of one node, before the POC's ``runtime.env`` is applied.

    Raises ``PlatformEnvError`` for a variable that cannot be derived, unless the POC sets it."""
    host = host or (host_facts.get("host_facts_data") or {}).get("hostname") or "host"
    deployment = _deployment(spec, deployment)
    poc = _poc_env(spec, deployment)
    where = f"{deployment or 'serving'}.runtime.env"
    out = _visibility(spec)
    facts = catalog_gpu(spec.cluster.gpu)
    scale_out = spec.cluster.interconnect.scale_out
    link_layer = _fabric(scale_out)
    if facts.is_gpu and link_layer:
        try:
            ports = _ports(host, host_facts, link_layer, scale_out, where)
            out.append(_hca(host, ports))
            if _moves_kv_by_nixl(spec, deployment) and "UCX_NET_DEVICES" not in poc:
                out.append(_ucx_devices(host, ports))
        except PlatformEnvError as exc:
            if exc.variable not in poc:
                raise
            ports = []
        if link_layer == "Ethernet" and "NCCL_IB_HCA" in poc:
            out.append(Derived("NCCL_IB_GID_INDEX", None, f"{where} sets NCCL_IB_HCA: not derived"))
        elif link_layer == "Ethernet" and ports:
            try:
                out.append(_gid_index(host, ports, where))
            except PlatformEnvError as exc:
                if exc.variable not in poc:
                    raise
    if facts.is_gpu:
        out.append(_socket_ifname(host, host_facts, address))
    return out + _switches(spec, deployment)


def node_env_provenance(
    spec: PocSpec,
    host_facts: dict[str, Any],
    *,
    host: str = "",
    address: str | None = None,
    deployment: str | None = None,
) -> dict[str, dict[str, Any]]:
    """Per variable: ``value`` and ``from`` (the fact or spec field); a variable the POC sets
    also keeps what was derived (``derived``, ``derived_from``); one left to the framework has
    ``value`` None and ``from`` saying why."""
    deployment = _deployment(spec, deployment)
    out: dict[str, dict[str, Any]] = {
        d.name: {"value": d.value, "from": d.source}
        for d in derive(spec, host_facts, host=host, address=address, deployment=deployment)
    }
    for name, value in _poc_env(spec, deployment).items():
        entry = {"value": value, "from": f"{deployment}.runtime.env"}
        if name in out and out[name]["value"] is not None:
            entry |= {"derived": out[name]["value"], "derived_from": out[name]["from"]}
        out[name] = entry
    return out


def node_env(
    spec: PocSpec,
    host_facts: dict[str, Any],
    *,
    host: str = "",
    address: str | None = None,
    deployment: str | None = None,
) -> dict[str, str]:
    """The environment of one node: the derived variables with the POC's ``runtime.env`` over
    them. ``host_facts``: that host's bring-up facts; ``address``: its inventory address;
    ``deployment``: ``serving`` or ``training`` (default: serving if the spec has it)."""
    provenance = node_env_provenance(
        spec, host_facts, host=host, address=address, deployment=deployment
    )
    return values(provenance)


def values(provenance: dict[str, dict[str, Any]]) -> dict[str, str]:
    """The variables of one node's provenance that have a value (the environment to set)."""
    return {name: e["value"] for name, e in provenance.items() if e["value"] is not None}


def _facts_of(facts_by_host: dict[str, dict], host: str) -> dict:
    if host not in facts_by_host:
        raise PlatformEnvError("", f"{host}: bring-up recorded no facts for this host")
    return facts_by_host[host] or {}


def platform_env_provenance(
    spec: PocSpec,
    facts_by_host: dict[str, dict[str, Any]],
    hosts_in_rank_order: list[str],
    *,
    addresses: dict[str, str] | None = None,
    deployment: str | None = None,
) -> dict[int, dict[str, dict[str, Any]]]:
    """:func:`node_env_provenance` per node rank (rank = position in ``hosts_in_rank_order``)."""
    return {
        rank: node_env_provenance(
            spec,
            _facts_of(facts_by_host, host),
            host=host,
            address=(addresses or {}).get(host),
            deployment=deployment,
        )
        for rank, host in enumerate(hosts_in_rank_order)
    }


def platform_env(
    spec: PocSpec,
    facts_by_host: dict[str, dict[str, Any]],
    hosts_in_rank_order: list[str],
    *,
    addresses: dict[str, str] | None = None,
    deployment: str | None = None,
) -> dict[int, dict[str, str]]:
    """:func:`node_env` per node rank: the ``node_env`` argument of
    ``pocforge.runtimes.plan.plan_deployment``. ``facts_by_host``: bring-up's facts per
    inventory host; ``addresses``: each host's inventory address (``ansible_host``)."""
    return {
        rank: values(entries)
        for rank, entries in platform_env_provenance(
            spec,
            facts_by_host,
            hosts_in_rank_order,
            addresses=addresses,
            deployment=deployment,
        ).items()
    }
