"""The bring-up probes' network facts (probe_rdma.py GID tables, probe_host.py interfaces) on
sysfs trees built from published captures and on this machine's own ``ip -j addr``.

Sources of every capture: tests/data/README.md ("platform/").
"""

from __future__ import annotations

import json

import pytest

from .conftest import DATA, ib_tree, net_tree, roce_tree, show_gids_rows


def ports_of(facts: dict) -> dict[str, dict]:
    return {f"{d['name']}:{p['port']}": p for d in facts["devices"] for p in d["ports"]}


@pytest.mark.parametrize(
    "capture",
    [
        "show_gids_mlx5_h100_roce.txt",
        "show_gids_mlx5_macvlan_pod.txt",
        "show_gids_rocep_ipv6_only_mi355x.txt",
    ],
)
def test_gid_table_is_what_show_gids_listed(tmp_path, probe_rdma, capture):
    """Every row show_gids printed comes back: index, GID, v1/v2 type, net device, and the
    IPv4 column decoded from the IPv4-mapped GID; the zero slots between are skipped."""
    facts = probe_rdma.probe(str(roce_tree(tmp_path, capture)), tools=False)
    got = [
        (name, g["index"], g["gid"], g["ipv4"], g["type"], g["ndev"])
        for name, port in ports_of(facts).items()
        for g in port["gids"]
    ]
    want = [
        (
            f"{r['dev']}:{r['port']}",
            r["index"],
            r["gid"],
            r["ipv4"],
            "RoCE v2" if r["ver"] == "v2" else "IB/RoCE v1",
            r["ndev"],
        )
        for r in show_gids_rows(capture)
    ]
    assert sorted(got) == sorted(want)
    assert all(p["link_layer"] == "Ethernet" for p in ports_of(facts).values())


def test_unpopulated_slots_below_the_table_are_skipped(tmp_path, probe_rdma):
    """The macvlan pod's table starts at index 4 (NVIDIA/nccl#1573: slots 0-3 are zero GIDs
    whose gid_attrs/types do not read); the probe lists 4..7 only and does not fail on them."""
    facts = probe_rdma.probe(
        str(roce_tree(tmp_path, "show_gids_mlx5_macvlan_pod.txt")), tools=False
    )
    port = ports_of(facts)["mlx5_0:1"]
    assert (tmp_path / "mlx5_0/ports/1/gids/0").read_text().strip().strip("0:") == ""
    assert [g["index"] for g in port["gids"]] == [4, 5, 6, 7]
    assert port["gids"][-1] == {
        "index": 7,
        "gid": "0000:0000:0000:0000:0000:ffff:0a98:000c",
        "type": "RoCE v2",
        "ndev": "net1",
        "ipv4": "10.152.0.12",
    }


def test_infiniband_ports_keep_their_keys_and_list_no_gids(tmp_path, probe_rdma):
    """ibstat's two FDR HCAs: port 1 ACTIVE/LinkUp at 56 Gb/s, port 2 DOWN/Polling; the
    existing keys are all there and an InfiniBand port has no GID list (addressed by LID)."""
    facts = probe_rdma.probe(str(ib_tree(tmp_path, "ibstat_mlx4_ib_2hca.txt")), tools=False)
    assert set(facts) == {
        "devices",
        "device_count",
        "active_ports",
        "active_rates_gbps",
        "ibv_devinfo",
        "ibv_devinfo_version",
    }
    assert (facts["device_count"], facts["active_ports"]) == (2, 2)
    assert facts["active_rates_gbps"] == [56.0, 56.0]
    ports = ports_of(facts)
    assert ports["mlx4_0:1"] == {
        "port": "1",
        "state": "ACTIVE",
        "phys_state": "LinkUp",
        "rate_gbps": 56.0,
        "link_layer": "InfiniBand",
        "gids": [],
    }
    assert (ports["mlx4_1:2"]["state"], ports["mlx4_1:2"]["phys_state"]) == ("DOWN", "Polling")
    device = facts["devices"][0]
    assert set(device) == {"name", "firmware", "bdf", "pcie", "ports"}
    assert device["firmware"] == "2.35.5100"


def test_ipv4_mapped_gids_decode_and_others_do_not(probe_rdma):
    """Only ``::ffff:a.b.c.d`` GIDs carry an IPv4 address; link-local and ULA IPv6 do not."""
    assert probe_rdma.mapped_ipv4("0000:0000:0000:0000:0000:ffff:0b00:0049") == "11.0.0.73"
    assert probe_rdma.mapped_ipv4("fe80:0000:0000:0000:a288:c2ff:fe5b:0374") is None
    assert probe_rdma.mapped_ipv4("fd93:16d3:59b6:010d:0690:81ff:fe39:e3e8") is None


# ------------------------------------------------------------------------ probe_host


def this_machine_net(tmp_path):
    """This machine's /sys/class/net operstate and mtu, as captured, rebuilt under tmp_path."""
    root = tmp_path / "net"
    for line in (DATA / "sysfs_net_this_machine.txt").read_text().splitlines():
        path, _, value = line.partition(":")
        name, attr = path.split("/")[-2:]
        (root / name).mkdir(parents=True, exist_ok=True)
        (root / name / attr).write_text(value + "\n")
    return root


def test_interfaces_from_ip_json(tmp_path, probe_host):
    """`ip -j addr show` as iproute2 6.1 printed it here: each link's IPv4s with prefix,
    operstate and mtu; links without an IPv4 list none; IPv6 is left out."""
    doc = json.loads((DATA / "ip_addr_j_this_machine.json").read_text())
    found, source = probe_host.interfaces(str(this_machine_net(tmp_path)), doc)
    assert source == "ip"
    assert found == [
        {"name": "eth0", "state": "UP", "mtu": 1400, "ipv4": ["192.0.2.2/24"]},
        {"name": "ifb0", "state": "DOWN", "mtu": 1500, "ipv4": []},
        {"name": "ifb1", "state": "DOWN", "mtu": 1500, "ipv4": []},
        {"name": "lo", "state": "UNKNOWN", "mtu": 65536, "ipv4": ["127.0.0.1/8"]},
    ]


def test_interfaces_from_sysfs_alone_have_states_but_no_addresses(tmp_path, probe_host):
    """Another host's tree without `ip`: sysfs gives name, operstate (as iproute2 spells it)
    and mtu; IPv4 is not in sysfs, so none is claimed, and the source says so."""
    found, source = probe_host.interfaces(str(this_machine_net(tmp_path)))
    assert source == "sysfs"
    assert [(i["name"], i["state"], i["mtu"], i["ipv4"]) for i in found] == [
        ("eth0", "UP", 1400, []),
        ("ifb0", "DOWN", 1500, []),
        ("ifb1", "DOWN", 1500, []),
        ("lo", "UNKNOWN", 65536, []),
    ]


def test_ioctl_fallback_reads_the_loopback_address(probe_host):
    """Without iproute2 the host's own interfaces get their primary IPv4 from SIOCGIFADDR /
    SIOCGIFNETMASK (a socket is created, never connected or bound)."""
    assert probe_host.ioctl_ipv4("lo") == ["127.0.0.1/8"]
    assert probe_host.ioctl_ipv4("no-such-if0") == []


def test_host_probe_keeps_every_key_and_adds_the_interfaces(tmp_path, probe_host):
    """The keys bring-up and preflight read are unchanged; interfaces come on top."""
    root = tmp_path / "net"
    doc = net_tree(root, [("lo", "unknown", 65536, ["127.0.0.1/8"])])
    facts = probe_host.probe(["/"], net_root=str(root), ip_doc=doc)
    assert set(facts) == {
        "hostname",
        "os",
        "os_id",
        "os_version",
        "kernel",
        "arch",
        "kernel_cmdline",
        "kernel_cmdline_args",
        "cpu_model",
        "cpu_count",
        "numa_nodes",
        "numa_cpus",
        "numa_balancing",
        "thp_enabled",
        "thp_defrag",
        "hugepages_total",
        "hugepage_size_kb",
        "mem_total_gb",
        "cpu_governors",
        "disks",
        "python",
        "interfaces",
        "interfaces_source",
    }
    assert facts["interfaces"] == [
        {"name": "lo", "state": "UNKNOWN", "mtu": 65536, "ipv4": ["127.0.0.1/8"]}
    ]
