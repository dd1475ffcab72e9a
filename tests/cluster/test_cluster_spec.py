"""Spec -> inventory and expectations (skipped until pocforge.spec exists)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import yaml

pytest.importorskip("pocforge.spec", reason="pocforge.spec not importable yet")

from pocforge.cluster import expectations_from_spec, inventory_from_spec  # noqa: E402


def _spec(tmp_path, **cluster):
    base = dict(
        gpu="MI300X",
        nodes=2,
        gpus_per_node=8,
        inventory=None,
        interconnect=SimpleNamespace(scale_out="roce-400g", scale_up="xgmi", nics_per_node=8),
        hosts=[
            SimpleNamespace(name="n1", address="10.0.0.1"),
            SimpleNamespace(name="n2", address="10.0.0.2"),
        ],
        ssh=SimpleNamespace(user="amd", port=2222, key_file="/k/id", become=None),
    )
    base.update(cluster)
    return SimpleNamespace(
        poc=SimpleNamespace(name="t"), cluster=SimpleNamespace(**base), source_dir=tmp_path
    )


def test_demo_spec_loads_into_expectations():
    from pocforge.spec import load_poc

    spec = load_poc("demo")
    exp = expectations_from_spec(spec)
    assert exp.gpus_per_node == (spec.cluster.gpus_per_node if exp.gpu_required else 0)


def test_bringup_takes_pinned_versions_and_weights_from_the_spec():
    """Bring-up gets the spec's runtimes (the SGLang POC: its ROCm image, the kit's wheels;
    the CPU demo: nothing to install); weights are staged only when the spec says where
    from."""
    from pocforge.spec import load_poc

    moe = expectations_from_spec(load_poc("deepseek-v3-fp8-mi355x-sglang")).extravars()
    (image,) = moe["container_image_images"]
    assert image["image"].startswith("lmsysorg/sglang-rocm:") and image["archive"] is None
    assert moe["python_env_wheels_dir"] == "/opt/pocforge/wheels"
    assert "model_staging_source" not in moe
    demo = load_poc("demo")
    extravars = expectations_from_spec(demo).extravars()
    assert extravars["python_env_venvs"] == extravars["container_image_images"] == []
    assert "python_env_wheels_dir" not in extravars
    demo.model.weights = (
        type(demo.model)
        .model_fields["weights"]
        .annotation.__args__[0](source="/nfs/models/tiny", dest="/opt/pocforge/models/tiny")
    )
    staged = expectations_from_spec(demo).extravars()
    assert (staged["model_staging_source"], staged["model_staging_dest"]) == (
        "/nfs/models/tiny",
        "/opt/pocforge/models/tiny",
    )


def test_hosts_become_an_inventory(tmp_path):
    spec = _spec(tmp_path)
    inv = yaml.safe_load(inventory_from_spec(spec, tmp_path / "inv.yml").read_text())
    assert inv["all"]["hosts"] == {
        "n1": {"ansible_host": "10.0.0.1"},
        "n2": {"ansible_host": "10.0.0.2"},
    }
    assert inv["all"]["vars"]["ansible_port"] == 2222
    assert inv["all"]["vars"]["pocforge_become"] is True  # user amd: root through sudo
    exp = expectations_from_spec(spec)
    assert (exp.gpu_vendor, exp.gpus_per_node, exp.rdma_nics, exp.rdma_rate_gbps) == (
        "amd",
        8,
        8,
        400.0,
    )
    assert exp.collective_reference["inter_node"]["all_reduce"] == 357.5


def test_own_inventory_wins_and_cpu_needs_no_gpu(tmp_path):
    (tmp_path / "hosts.yml").write_text("all: {hosts: {x: {}}}\n")
    spec = _spec(
        tmp_path,
        inventory="hosts.yml",
        gpu="cpu",
        interconnect=SimpleNamespace(scale_out="none", scale_up="none", nics_per_node=0),
    )
    assert inventory_from_spec(spec, tmp_path / "out.yml") == tmp_path / "hosts.yml"
    exp = expectations_from_spec(spec)
    assert (exp.gpu_required, exp.rdma_nics) == (False, 0)
