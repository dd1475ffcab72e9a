"""Platform facts (data/platforms.yaml) reach preflight as preflight_platform, each sourced."""

from __future__ import annotations

from pocforge.cluster import ClusterExpectations
from pocforge.cluster.expectations import _platforms, platform_facts


def test_every_platform_is_a_catalog_gpu_and_every_fact_has_its_document():
    from pocforge.catalog import gpu_names

    for name, entry in _platforms().items():
        assert name in gpu_names(), name
        assert entry["nvswitch"]["gpus_per_node"] in (0, 8), name
        assert entry["nvswitch"]["source"] and entry["kernel_cmdline"]["source"], name
        assert isinstance(entry["kernel_cmdline"]["required"], list), name


def test_nvswitch_only_on_nvidia_hgx_and_iommu_pt_where_the_guide_asks():
    """H100/H200/B200 8-GPU baseboards have NVSwitch (Fabric Manager applies); AMD platforms
    do not. iommu=pt is required on MI300X (AMD's guide), not on NVIDIA HGX."""
    for name in ("H100", "H200", "B200"):
        assert platform_facts(name)["nvswitch"]["gpus_per_node"] == 8
        assert platform_facts(name)["kernel_cmdline"]["required"] == []
    for name in ("MI300X", "MI325X", "MI355X"):
        assert platform_facts(name)["nvswitch"]["gpus_per_node"] == 0
    mi300x = platform_facts("MI300X")
    assert mi300x["name"] == "MI300X"
    assert mi300x["kernel_cmdline"]["required"] == ["iommu=pt"]
    assert mi300x["kernel_cmdline"]["intel_host"] == ["intel_iommu=on"]
    assert "mi300x.rst" in mi300x["kernel_cmdline"]["source"]


def test_expectations_pass_the_platform_to_preflight():
    """The spec's GPU type picks the entry; an unknown type passes {} (checks then skip)."""
    exp = ClusterExpectations(gpu_model="H100", gpu_vendor="nvidia")
    assert exp.extravars()["preflight_platform"]["nvswitch"]["gpus_per_node"] == 8
    assert ClusterExpectations().extravars()["preflight_platform"] == {}
    assert ClusterExpectations(gpu_model="cpu").extravars()["preflight_platform"] == {}
    pinned = ClusterExpectations(gpu_model="H100", platform_facts={"name": "custom"})
    assert pinned.extravars()["preflight_platform"] == {"name": "custom"}
