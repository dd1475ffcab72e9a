"""The planner's GPU facts (fp4 peak, platform topology and NICs, achievable fractions) reach
pocforge.catalog from devices.yaml, every entry in range, and the schema refuses a bad one."""

from __future__ import annotations

from dataclasses import asdict, fields

import pytest
from pydantic import ValidationError

from pocforge.catalog import GPU, gpu, gpu_names
from pocforge_kernels import devices

GPUS = [name for name in gpu_names() if gpu(name).is_gpu]


def test_the_model_and_the_dataclass_carry_the_same_fields():
    """devices.Gpu and catalog.GPU mirror each other, so GPU(**asdict(facts)) constructs."""
    assert {f.name for f in fields(devices.Gpu)} == set(GPU.model_fields)
    for facts in devices.gpus().values():
        assert GPU(**asdict(facts)).model_dump() == asdict(facts)


@pytest.mark.parametrize("name", GPUS)
def test_every_gpu_has_sane_planner_facts(name):
    """Fractions in (0, 1], a mesh on AMD and a switch on NVIDIA, 8-GPU nodes, a NIC, sources."""
    g = gpu(name)
    for eff in (g.matrix_eff, g.hbm_eff, g.link_eff):
        assert 0 < eff <= 1, (name, eff)
    assert g.topology == {"amd": "mesh", "nvidia": "switch"}[g.vendor]
    assert g.gpus_per_node == 8
    assert 0 < g.nic_gbs < g.link_gbs
    assert g.fp4_tflops == 0 or g.fp4_tflops >= g.fp8_tflops
    assert g.platform and g.eff_source and "none" not in g.eff_source


def test_the_cpu_entry_is_neutral():
    g = gpu("cpu")
    assert (g.topology, g.gpus_per_node, g.pair_gbs) == ("none", 1, 0.0)
    assert g.fp4_tflops == g.nic_gbs == g.matrix_eff == g.hbm_eff == g.link_eff == 0


def test_only_mi355x_and_b200_have_fp4_at_twice_their_fp8():
    """MI355X MXFP4 10.1 PF and B200 FP4 9 PF dense (data sheets); the others have no FP4 units."""
    with_fp4 = {name: gpu(name).fp4_tflops for name in gpu_names() if gpu(name).fp4_tflops}
    assert with_fp4 == {"MI355X": 10066.3, "B200": 9000.0}
    for name, fp4 in with_fp4.items():
        assert fp4 == pytest.approx(2 * gpu(name).fp8_tflops, rel=1e-4)


def test_the_fields_reach_the_catalog():
    """MI300X: 319 GB/s rccl busbw of 448, Triad 4.09 of 5.3 TB/s, BF16 MAMF 668 of 1307."""
    g = gpu("MI300X")
    assert (g.matrix_eff, g.hbm_eff, g.link_eff) == (0.51, 0.77, 0.71)
    assert (g.topology, g.gpus_per_node, g.nic_gbs, g.fp4_tflops) == ("mesh", 8, 50, 0)
    assert "rccl-tests" in g.eff_source and "UBB 2.0" in g.platform


@pytest.mark.parametrize(
    ("name", "pair"), [("MI300X", 64.0), ("MI355X", 76.8), ("H100", 450.0), ("B200", 900.0)]
)
def test_pair_bandwidth_is_one_mesh_link_or_the_whole_switch_port(name, pair):
    """A full xGMI mesh gives each of 7 peers link_gbs/7; NVSwitch gives any pair link_gbs."""
    assert gpu(name).pair_gbs == pytest.approx(pair)


@pytest.mark.parametrize(
    ("name", "sibling", "field", "says"),
    [
        ("MI325X", "MI300X", "hbm_eff", "MI300X's"),
        ("MI325X", "MI300X", "link_eff", "MI300X's"),
        ("MI355X", "MI300X", "hbm_eff", "MI300X's"),
        ("MI355X", "MI300X", "link_eff", "MI300X's"),
        ("H200", "H100", "link_eff", "H100's"),
        ("B200", "H200", "hbm_eff", "H200's"),
    ],
)
def test_a_borrowed_fraction_is_the_siblings_and_says_so(name, sibling, field, says):
    assert getattr(gpu(name), field) == getattr(gpu(sibling), field)
    assert says in gpu(name).eff_source


def _good() -> dict:
    return gpu("MI300X").model_dump()


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"nic_gb": 50}, "Extra inputs are not permitted"),
        ({"matrix_eff": 1.2}, "less than or equal to 1"),
        ({"hbm_eff": -0.1}, "greater than or equal to 0"),
        ({"link_eff": 0}, "fractions must be above 0"),
        ({"topology": "ring"}, "'mesh', 'switch' or 'none'"),
        ({"topology": "none"}, "for the cpu entry only"),
        ({"gpus_per_node": 1}, "a mesh needs gpus_per_node >= 2"),
        ({"gpus_per_node": 0}, "greater than or equal to 1"),
        ({"fp4_tflops": 1000.0}, "fp4_tflops below fp8_tflops"),
    ],
)
def test_the_schema_refuses_one_bad_field(change, match):
    with pytest.raises(ValidationError, match=match):
        GPU(**(_good() | change))
