"""Bring-up's facts for the platform-environment tests, made the way bring-up makes them.

The probes (``playbooks/roles/*/files/probe_*.py``) run on sysfs trees built in ``tmp_path``
from published captures (``tests/data/platform``, sources in ``tests/data/README.md``): a
show_gids table becomes ``ports/N/gids/K`` with ``gid_attrs/types/K`` and ``ndevs/K``, an
ibstat listing becomes ``ports/N/{state,phys_state,rate,link_layer}``. Their output goes
through ``EventCollector`` as the ``ansible_facts`` of a task, so a host's facts are exactly
what the controller keeps (``HostResult.facts``).
"""

from __future__ import annotations

import copy
import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from pocforge.cluster.events import EventCollector
from pocforge.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "platform"
ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"


def load_probe(relpath: str, name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "playbooks" / relpath)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def probe_rdma():
    return load_probe("roles/rdma_nics/files/probe_rdma.py", "pocforge_probe_rdma")


@pytest.fixture(scope="session")
def probe_host():
    return load_probe("roles/host_facts/files/probe_host.py", "pocforge_probe_host")


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def show_gids_rows(name: str) -> list[dict]:
    """The table rows of a show_gids capture: dev, port, index, gid, ipv4 (or None), ver, ndev."""
    rows = []
    for line in (DATA / name).read_text().splitlines()[2:]:
        fields = line.split()
        if len(fields) not in (6, 7):
            continue
        rows.append(
            {
                "dev": fields[0],
                "port": fields[1],
                "index": int(fields[2]),
                "gid": fields[3],
                "ipv4": fields[4] if len(fields) == 7 else None,
                "ver": fields[-2],
                "ndev": fields[-1],
            }
        )
    return rows


def roce_tree(root: Path, capture: str, state: str = "4: ACTIVE") -> Path:
    """A /sys/class/infiniband of RoCE ports whose GID tables are the capture's rows; the slots
    the capture does not list read as zero GIDs without ``types`` / ``ndevs`` (how the kernel
    shows an unpopulated slot). ``state`` is the scenario's port state (show_gids has none)."""
    ports: dict[Path, int] = {}
    for row in show_gids_rows(capture):
        port = root / row["dev"] / "ports" / row["port"]
        _write(port / "gids" / str(row["index"]), row["gid"])
        kind = "RoCE v2" if row["ver"] == "v2" else "IB/RoCE v1"
        _write(port / "gid_attrs" / "types" / str(row["index"]), kind)
        _write(port / "gid_attrs" / "ndevs" / str(row["index"]), row["ndev"])
        ports[port] = max(ports.get(port, 0), row["index"])
    for port, highest in ports.items():
        _write(port / "state", state)
        _write(port / "phys_state", "5: LinkUp" if "ACTIVE" in state else "3: Disabled")
        _write(port / "link_layer", "Ethernet")
        for index in range(highest + 3):
            slot = port / "gids" / str(index)
            if not slot.exists():
                _write(slot, ZERO_GID)
    return root


# ibstat's words -> the sysfs text the kernel prints for them (drivers/infiniband/core/sysfs.c)
_IB_STATE = {
    "Active": "4: ACTIVE",
    "Down": "1: DOWN",
    "Initializing": "2: INIT",
    "Armed": "3: ARMED",
}
_IB_PHYS = {"LinkUp": "5: LinkUp", "Polling": "2: Polling", "Disabled": "3: Disabled"}
_IB_RATE = {"56": "56 Gb/sec (4X FDR)", "10": "10 Gb/sec (4X)"}


def ib_tree(root: Path, capture: str) -> Path:
    """A /sys/class/infiniband from an ibstat listing (devices, firmware, ports)."""
    dev = port = None
    for line in (DATA / capture).read_text().splitlines():
        if match := re.match(r"CA '([^']+)'", line.strip()):
            dev, port = root / match.group(1), None
        elif match := re.match(r"Firmware version: (\S+)", line.strip()):
            _write(dev / "fw_ver", match.group(1))
        elif match := re.match(r"Port (\d+):", line.strip()):
            port = dev / "ports" / match.group(1)
        elif port is not None and (match := re.match(r"([A-Za-z ]+): (.+)$", line.strip())):
            key, value = match.groups()
            if key == "State":
                _write(port / "state", _IB_STATE[value])
            elif key == "Physical state":
                _write(port / "phys_state", _IB_PHYS[value])
            elif key == "Rate":
                _write(port / "rate", _IB_RATE[value])
            elif key == "Link layer":
                _write(port / "link_layer", value)
    return root


def net_tree(root: Path, links: list[tuple[str, str, int, list[str]]]) -> list[dict]:
    """A /sys/class/net of ``(name, operstate, mtu, [a.b.c.d/nn])`` links, and the same links
    as ``ip -j addr show`` prints them (the shape of ``ip_addr_j_this_machine.json``)."""
    doc = []
    for ifindex, (name, state, mtu, cidrs) in enumerate(links, start=1):
        _write(root / name / "operstate", state)
        _write(root / name / "mtu", str(mtu))
        doc.append(
            {
                "ifindex": ifindex,
                "ifname": name,
                "flags": ["LOOPBACK", "UP", "LOWER_UP"] if name == "lo" else ["UP", "LOWER_UP"],
                "mtu": mtu,
                "operstate": "UNKNOWN" if name == "lo" else state.upper(),
                "addr_info": [
                    {
                        "family": "inet",
                        "local": cidr.split("/")[0],
                        "prefixlen": int(cidr.split("/")[1]),
                        "scope": "host" if name == "lo" else "global",
                        "label": name,
                    }
                    for cidr in cidrs
                ],
            }
        )
    return doc


LOOPBACK = ("lo", "unknown", 65536, ["127.0.0.1/8"])

# One entry per captured host: its RDMA capture, the links its capture names (addresses from
# the capture; prefix lengths and MTUs are not in them: /24 and 1500 chosen), the address the
# inventory reaches it at, and the default route's interface ansible would report.
HOSTS: dict[str, dict[str, Any]] = {
    # NVIDIA/nccl#1131: H100 node "loving-insect", 2 nodes (-H 10.248.0.10,10.248.0.12),
    # NCCL_SOCKET_IFNAME=ens9f0np0; RoCE netdevs and their IPv4s from its show_gids
    "loving-insect": {
        "rdma": ("roce", "show_gids_mlx5_h100_roce.txt"),
        "links": [
            LOOPBACK,
            ("ens9f0np0", "up", 1500, ["10.248.0.10/24"]),
            ("ens3np0", "up", 1500, ["11.0.0.72/24"]),
            ("ens2np0", "up", 1500, ["11.0.0.73/24"]),
        ],
        "address": "10.248.0.10",
    },
    # NVIDIA/nccl#1573: a Kubernetes pod with macvlan RoCE interfaces net1/net2 (GIDs 4-7);
    # pods bootstrap over net1 (k8snetworkplumbingwg/multus-cni#1100: "Bootstrap : Using net1")
    "test-macvlan-pod-2": {
        "rdma": ("roce", "show_gids_mlx5_macvlan_pod.txt"),
        "links": [
            LOOPBACK,
            ("net1", "up", 1500, ["10.152.0.12/24"]),
            ("net2", "up", 1500, ["10.152.4.12/24"]),
        ],
        "address": "10.152.0.12",
    },
    # kvcache-ai/Mooncake#1617: MI355X node whose RoCE GID tables are IPv6 only (v2)
    "mi355-gpu-17": {
        "rdma": ("roce", "show_gids_rocep_ipv6_only_mi355x.txt"),
        "links": [LOOPBACK, ("enp105s0", "up", 1500, []), ("enp121s0", "up", 1500, [])],
        "address": None,
    },
    # blog.csdn.net/msdnchina/article/details/72859887: host "rac2", two ConnectX-3 FDR HCAs
    # (port 1 Active, port 2 Down); its `ip addr` shows enp5s0f0: the address is chosen
    "rac2": {
        "rdma": ("ib", "ibstat_mlx4_ib_2hca.txt"),
        "links": [LOOPBACK, ("enp5s0f0", "up", 1500, ["192.0.2.31/24"])],
        "address": "rac2.example.com",
        "default_ipv4": {"interface": "enp5s0f0", "address": "192.0.2.31"},
    },
}


def probe_facts(tmp_path: Path, probe_host, probe_rdma, name: str, state: str = "4: ACTIVE"):
    """What the two probes print on the captured host ``name`` (sysfs trees under tmp_path)."""
    host = HOSTS[name]
    kind, capture = host["rdma"]
    ib_root = tmp_path / name / "infiniband"
    if kind == "roce":
        roce_tree(ib_root, capture, state)
    else:
        ib_tree(ib_root, capture)
    net_root = tmp_path / name / "net"
    doc = net_tree(net_root, host["links"])
    host_data = probe_host.probe(["/"], net_root=str(net_root), ip_doc=doc)
    host_data["hostname"] = name  # the probe ran here; the capture's host is the one named
    return host_data, probe_rdma.probe(str(ib_root), tools=False)


def bringup_facts(tmp_path, probe_host, probe_rdma, name: str, state: str = "4: ACTIVE") -> dict:
    """The host's facts as the controller keeps them after bring-up (``HostResult.facts``)."""
    host_data, rdma_data = probe_facts(tmp_path, probe_host, probe_rdma, name, state)
    collector = EventCollector("bringup.yml")
    events = [
        {"ansible_facts": {"host_facts_data": host_data}},
        {"ansible_facts": {"rdma_nics_data": rdma_data}},
    ]
    if HOSTS[name].get("default_ipv4"):
        events.append(
            {"ansible_facts": {"ansible_default_ipv4": HOSTS[name]["default_ipv4"]}},
        )
    for res in events:
        collector({"event": "runner_on_ok", "event_data": {"host": name, "res": res}})
    return collector.result.hosts[name].facts


@pytest.fixture
def facts(tmp_path, probe_host, probe_rdma):
    """``facts(name, state=...)``: one captured host's bring-up facts."""

    def make(name: str, state: str = "4: ACTIVE") -> dict:
        return bringup_facts(tmp_path, probe_host, probe_rdma, name, state)

    return make


BASE: dict[str, Any] = {
    "poc": {"name": "platform", "customer": "ACME", "owner": "me@example.com"},
    "model": {
        "id": "org/dense-8b",
        "facts": {"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "experts": 0},
    },
    "cluster": {
        "gpu": "MI300X",
        "nodes": 1,
        "gpus_per_node": 8,
        "interconnect": {"scale_up": "xgmi", "scale_out": "roce-400g", "nics_per_node": 2},
    },
    "serving": {
        "framework": "vllm",
        "parallelism": {"tp": 8},
        "workloads": [
            {
                "name": "chat",
                "dataset": {"kind": "random", "isl": 128, "osl": 16},
                "load": {"concurrency": [1]},
                "num_prompts": 10,
            }
        ],
    },
}


@pytest.fixture
def spec(tmp_path):
    """``spec(**sections)``: the base spec with sections deep-merged over it, loaded."""

    def make(**changes: Any):
        data = copy.deepcopy(BASE)
        for key, value in changes.items():
            if isinstance(value, dict) and isinstance(data.get(key), dict):
                data[key] = _merge(data[key], value)
            else:
                data[key] = value
        path = tmp_path / "pocs" / "platform" / "poc.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return load_spec(path)

    return make


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for key, value in over.items():
        out[key] = (
            _merge(out[key], value)
            if isinstance(value, dict) and isinstance(out.get(key), dict)
            else value
        )
    return out
