"""Each node's platform environment (pocforge.runtimes.platform_env) from bring-up's facts.

The facts are the probes' own output on sysfs trees built from published captures of real
hosts (tests/runtimes/conftest.py; sources in tests/data/README.md), kept the way the
controller keeps them (EventCollector -> HostResult.facts).
"""

from __future__ import annotations

import pytest

from pocforge.runtimes.platform_env import (
    PlatformEnvError,
    node_env,
    node_env_provenance,
    platform_env,
    platform_env_provenance,
)
from pocforge.spec import SpecError

from .conftest import HOSTS

EIGHT = "0,1,2,3,4,5,6,7"


def env_of(spec, facts, name, **kwargs):
    return node_env(spec, facts(name), host=name, address=HOSTS[name]["address"], **kwargs)


# ------------------------------------------------------------------------ RoCE, InfiniBand


def test_roce_node_gets_devices_hcas_gid_index_and_bootstrap_interface(spec, facts):
    """H100 RoCE host of NVIDIA/nccl#1131 under an MI300X RoCE spec: all 8 GPUs visible to HIP,
    both ACTIVE RoCE ports by exact name, GID 3 (RoCE v2, ::ffff:11.0.0.7x, as show_gids
    lists) and the interface holding the inventory address for bootstrap."""
    assert env_of(spec(), facts, "loving-insect") == {
        "HIP_VISIBLE_DEVICES": EIGHT,
        "NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1",
        "NCCL_IB_GID_INDEX": "3",
        "NCCL_SOCKET_IFNAME": "=ens9f0np0",
    }


def test_infiniband_node_lists_only_active_ports_and_no_gid_index(spec, facts):
    """ibstat's two FDR HCAs on an H100 InfiniBand spec: port 1 of each (port 2 is Down),
    CUDA_VISIBLE_DEVICES, no GID index (IB is addressed by LID); the inventory names the host
    by DNS, so bootstrap takes the default route's interface."""
    s = spec(cluster={"gpu": "H100", "interconnect": {"scale_out": "ib-ndr-400g"}})
    assert env_of(s, facts, "rac2") == {
        "CUDA_VISIBLE_DEVICES": EIGHT,
        "NCCL_IB_HCA": "=mlx4_0:1,mlx4_1:1",
        "NCCL_SOCKET_IFNAME": "=enp5s0f0",
    }
    why = node_env_provenance(s, facts("rac2"), host="rac2", address="rac2.example.com")
    assert "default_ipv4.interface" in why["NCCL_SOCKET_IFNAME"]["from"]
    assert "not an IP address" in why["NCCL_SOCKET_IFNAME"]["from"]


def test_env_is_per_node_rank_and_gid_indices_differ_by_node(spec, facts):
    """Two nodes in rank order: the pod of NVIDIA/nccl#1573 has its IPv4 RoCE v2 GID at 7
    where the other host has 3 (the issue's complaint: one cluster-wide index cannot fit
    both); each rank gets its own, and its own bootstrap interface."""
    s = spec(
        cluster={
            "nodes": 2,
            "hosts": [
                {"name": "loving-insect", "address": "10.248.0.10"},
                {"name": "test-macvlan-pod-2", "address": "10.152.0.12"},
            ],
        },
        serving={"replicas": 2},
    )
    order = ["loving-insect", "test-macvlan-pod-2"]
    by_host = {name: facts(name) for name in order}
    env = platform_env(s, by_host, order, addresses={h.name: h.address for h in s.cluster.hosts})
    assert env[0]["NCCL_IB_GID_INDEX"] == "3" and env[1]["NCCL_IB_GID_INDEX"] == "7"
    assert env[0]["NCCL_SOCKET_IFNAME"] == "=ens9f0np0" and env[1]["NCCL_SOCKET_IFNAME"] == "=net1"
    assert env[1]["NCCL_IB_HCA"] == "=mlx5_0:1,mlx5_1:1"
    assert set(platform_env_provenance(s, by_host, order)) == {0, 1}


def test_ethernet_cluster_sets_no_rdma_variables(spec, facts):
    """scale_out ethernet: no NCCL_IB_* even though the host has RDMA NICs."""
    s = spec(cluster={"interconnect": {"scale_out": "ethernet", "nics_per_node": 0}})
    assert env_of(s, facts, "loving-insect") == {
        "HIP_VISIBLE_DEVICES": EIGHT,
        "NCCL_SOCKET_IFNAME": "=ens9f0np0",
    }


def test_cpu_cluster_gets_only_the_pocs_own_environment(spec):
    """cluster.gpu cpu: no device visibility and no NCCL variables, facts or not."""
    s = spec(
        cluster={"gpu": "cpu", "gpus_per_node": 2, "interconnect": {"scale_out": "none"}},
        serving={"parallelism": {"tp": 2}, "runtime": {"env": {"OMP_NUM_THREADS": "1"}}},
    )
    assert node_env(s, {}, host="h1", address="127.0.0.1") == {"OMP_NUM_THREADS": "1"}


def test_gpus_per_node_sets_how_many_devices_are_visible(spec, facts):
    s = spec(cluster={"gpus_per_node": 4}, serving={"parallelism": {"tp": 4}})
    assert env_of(s, facts, "loving-insect")["HIP_VISIBLE_DEVICES"] == "0,1,2,3"


# ------------------------------------------------------------------------ errors


def test_no_active_port_is_an_error_naming_the_host_and_what_was_found(spec, facts):
    """Every RoCE port DOWN on a RoCE cluster: refused before launch, naming the host, the
    ports seen and the two ways out."""
    with pytest.raises(PlatformEnvError, match="loving-insect: no RDMA port is ACTIVE") as info:
        node_env(spec(), facts("loving-insect", state="1: DOWN"), host="loving-insect")
    assert "mlx5_0 port 1 DOWN Ethernet" in str(info.value)
    assert "set NCCL_IB_HCA in serving.runtime.env" in str(info.value)


def test_fabric_mismatch_is_an_error(spec, facts):
    """An InfiniBand spec on a host whose ACTIVE ports are Ethernet (RoCE): no IB port."""
    s = spec(cluster={"interconnect": {"scale_out": "ib-ndr-400g"}})
    with pytest.raises(PlatformEnvError, match="ACTIVE with link layer InfiniBand"):
        node_env(s, facts("loving-insect"), host="loving-insect")


def test_missing_rdma_facts_on_an_rdma_cluster_is_an_error(spec, facts):
    host_only = {k: v for k, v in facts("loving-insect").items() if k != "rdma_nics_data"}
    with pytest.raises(PlatformEnvError, match="recorded no rdma_nics_data"):
        node_env(spec(), host_only, host="loving-insect")


def test_ipv6_only_gid_table_is_an_error_that_names_the_usable_indices(spec, facts):
    """The MI355X RoCE ports of kvcache-ai/Mooncake#1617 carry only IPv6 GIDs: no IPv4 RoCE
    v2 entry to pick, so the error names each port and its routable RoCE v2 IPv6 index."""
    s = spec(cluster={"gpu": "MI355X"})
    with pytest.raises(PlatformEnvError) as info:
        node_env(s, facts("mi355-gpu-17"), host="mi355-gpu-17")
    message = str(info.value)
    assert message.startswith("mi355-gpu-17: no RoCE v2 GID with an IPv4 address on")
    assert "rocep105s0:1 (RoCE v2 IPv6 GIDs at 1)" in message
    assert "set NCCL_IB_GID_INDEX in serving.runtime.env" in message


def test_ports_with_different_gid_indices_on_one_node_are_an_error(spec, facts, probe_rdma):
    """NCCL_IB_GID_INDEX is one number per process: two ports at 3 and 7 cannot share it."""
    mixed = facts("loving-insect")
    pod = facts("test-macvlan-pod-2")
    mixed["rdma_nics_data"]["devices"][1] = pod["rdma_nics_data"]["devices"][1]
    with pytest.raises(
        PlatformEnvError, match=r"at different indices \(mlx5_0:1 at 3, mlx5_1:1 at 7\)"
    ):
        node_env(spec(), mixed, host="loving-insect")


def test_a_rank_without_facts_is_an_error(spec, facts):
    with pytest.raises(PlatformEnvError, match="h2: bring-up recorded no facts"):
        platform_env(spec(), {"loving-insect": facts("loving-insect")}, ["loving-insect", "h2"])


# ------------------------------------------------------------------------ the POC wins


def test_pocs_runtime_env_wins_and_provenance_keeps_the_derived_value(spec, facts):
    """The POC engineer's NCCL_IB_GID_INDEX replaces the derived 3; the provenance says both."""
    s = spec(serving={"runtime": {"env": {"NCCL_IB_GID_INDEX": "1", "NCCL_DEBUG": "INFO"}}})
    env = env_of(s, facts, "loving-insect")
    assert (env["NCCL_IB_GID_INDEX"], env["NCCL_DEBUG"]) == ("1", "INFO")
    why = node_env_provenance(s, facts("loving-insect"), host="loving-insect")
    assert why["NCCL_IB_GID_INDEX"] == {
        "value": "1",
        "from": "serving.runtime.env",
        "derived": "3",
        "derived_from": "loving-insect: rdma_nics_data, RoCE v2 GID with an IPv4 address at "
        "index 3 on mlx5_0:1, mlx5_1:1",
    }


def test_a_poc_override_silences_the_error_it_overrides(spec, facts):
    """IPv6-only ports with the POC's own GID index: no error, the POC's value is used."""
    s = spec(cluster={"gpu": "MI355X"}, serving={"runtime": {"env": {"NCCL_IB_GID_INDEX": "1"}}})
    env = node_env(s, facts("mi355-gpu-17"), host="mi355-gpu-17")
    assert env["NCCL_IB_GID_INDEX"] == "1"
    assert env["NCCL_IB_HCA"] == "=rocep105s0:1,rocep121s0:1"


def test_pocs_own_hca_list_stops_the_gid_derivation(spec, facts):
    """With ports all DOWN and the POC naming NCCL_IB_HCA itself: no error, and no GID index
    derived from ports the POC may not use (the provenance says why)."""
    s = spec(serving={"runtime": {"env": {"NCCL_IB_HCA": "=mlx5_0:1"}}})
    down = facts("loving-insect", state="1: DOWN")
    env = node_env(s, down, host="loving-insect", address="10.248.0.10")
    assert env["NCCL_IB_HCA"] == "=mlx5_0:1" and "NCCL_IB_GID_INDEX" not in env
    why = node_env_provenance(s, down, host="loving-insect")
    assert why["NCCL_IB_GID_INDEX"]["value"] is None
    assert "sets NCCL_IB_HCA" in why["NCCL_IB_GID_INDEX"]["from"]


# ------------------------------------------------------------------------ provenance


def test_provenance_names_the_fact_behind_each_value(spec, facts):
    why = node_env_provenance(
        spec(), facts("loving-insect"), host="loving-insect", address="10.248.0.10"
    )
    assert why["HIP_VISIBLE_DEVICES"]["from"] == (
        "catalog: MI300X is amd; cluster.gpus_per_node = 8"
    )
    assert why["NCCL_IB_HCA"]["from"].startswith("loving-insect: rdma_nics_data, ports ACTIVE")
    assert why["NCCL_SOCKET_IFNAME"] == {
        "value": "=ens9f0np0",
        "from": "loving-insect: host_facts_data.interfaces, ens9f0np0 holds the inventory "
        "address 10.248.0.10",
    }


def test_loopback_address_leaves_the_bootstrap_interface_to_nccl(spec, facts):
    """A local connection (127.0.0.1): lo would not reach another node; not set, and said."""
    s = spec(cluster={"interconnect": {"scale_out": "ethernet"}})
    why = node_env_provenance(s, facts("loving-insect"), host="loving-insect", address="127.0.0.1")
    assert why["NCCL_SOCKET_IFNAME"]["value"] is None
    assert "loopback" in why["NCCL_SOCKET_IFNAME"]["from"]
    assert "NCCL_SOCKET_IFNAME" not in node_env(s, facts("loving-insect"), address="127.0.0.1")


# ------------------------------------------------------------------------ serving.platform


@pytest.mark.parametrize(("aiter", "value"), [(True, "1"), (False, "0")])
def test_aiter_switch_becomes_vllms_rocm_variable(spec, facts, aiter, value):
    s = spec(serving={"platform": {"aiter": aiter}})
    assert env_of(s, facts, "loving-insect")["VLLM_ROCM_USE_AITER"] == value
    why = node_env_provenance(s, facts("loving-insect"), host="loving-insect")
    assert why["VLLM_ROCM_USE_AITER"]["from"] == "serving.platform.aiter"


def test_aiter_is_a_serving_switch_only(spec, facts):
    """The training deployment of the same spec does not get the serving switch."""
    s = spec(serving={"platform": {"aiter": True}})
    env = env_of(s, facts, "loving-insect", deployment="training")
    assert "VLLM_ROCM_USE_AITER" not in env


def problems(spec, **changes) -> list[str]:
    with pytest.raises(SpecError) as info:
        spec(**changes)
    return [str(p) for p in info.value.problems]


def test_aiter_refused_for_sglang(spec):
    (msg,) = problems(spec, serving={"framework": "sglang", "platform": {"aiter": True}})
    assert "serving.platform.aiter: aiter is vLLM's ROCm switch (VLLM_ROCM_USE_AITER)" in msg
    assert "remove serving.platform.aiter" in msg


def test_aiter_refused_on_nvidia(spec):
    (msg,) = problems(spec, cluster={"gpu": "H100"}, serving={"platform": {"aiter": False}})
    assert "serving.platform.aiter: AITER kernels run on AMD GPUs (ROCm) only" in msg
    assert "cluster.gpu is H100 (nvidia)" in msg


def test_aiter_and_runtime_env_must_agree(spec):
    (msg,) = problems(
        spec,
        serving={"platform": {"aiter": True}, "runtime": {"env": {"VLLM_ROCM_USE_AITER": "0"}}},
    )
    assert "sets VLLM_ROCM_USE_AITER='0', the opposite of aiter: true" in msg
    agreeing = spec(
        serving={"platform": {"aiter": True}, "runtime": {"env": {"VLLM_ROCM_USE_AITER": "1"}}}
    )
    assert agreeing.serving.platform.aiter is True


def test_platform_section_forbids_unknown_switches(spec):
    (msg,) = problems(spec, serving={"platform": {"aiter_moe": True}})
    assert "aiter_moe" in msg


# ------------------------------------------------------------------------ NIXL's transport


PD = {
    "parallelism": {"tp": 1},  # each pool has its own layout
    "disaggregation": {"prefill": {"instances": 2, "tp": 2}, "decode": {"instances": 1, "tp": 4}},
}


def test_nixl_kv_transfer_gets_ucx_devices_on_the_fabrics_ports(spec, facts):
    """vLLM's NixlConnector guide: NCCL variables do not apply to NIXL; UCX_NET_DEVICES
    names the devices (``mlx5_0:1,mlx5_1:1``): the ports NCCL_IB_HCA names."""
    env = env_of(spec(serving=PD), facts, "loving-insect")
    assert env["UCX_NET_DEVICES"] == "mlx5_0:1,mlx5_1:1"
    assert env["NCCL_IB_HCA"] == "=mlx5_0:1,mlx5_1:1"  # the collectives still read it
    assert "UCX_NET_DEVICES" not in env_of(spec(), facts, "loving-insect")  # no P/D
    mooncake = {**PD, "disaggregation": {**PD["disaggregation"], "connector": "MooncakeConnector"}}
    assert "UCX_NET_DEVICES" not in env_of(spec(serving=mooncake), facts, "loving-insect")
    own = spec(serving={**PD, "runtime": {"env": {"UCX_NET_DEVICES": "mlx5_1:1"}}})
    assert env_of(own, facts, "loving-insect")["UCX_NET_DEVICES"] == "mlx5_1:1"  # the POC wins
