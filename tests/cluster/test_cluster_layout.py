"""Playbook hygiene that a linter does not see: knobs documented, references sourced."""

from __future__ import annotations

from pathlib import Path

import yaml

from pocforge.cluster import collective_references

PLAYBOOKS = Path(__file__).resolve().parents[2] / "playbooks"


def test_every_role_knob_is_in_the_example_group_vars():
    documented = yaml.safe_load((PLAYBOOKS / "inventory.example/group_vars/all.yml").read_text())
    for defaults in sorted(PLAYBOOKS.glob("roles/*/defaults/main.yml")):
        role = defaults.parts[-3]
        knobs = yaml.safe_load(defaults.read_text()) or {}
        for knob, value in knobs.items():
            assert knob.startswith(f"{role}_"), f"{knob} in {role} lacks the role prefix"
            assert knob in documented, f"{knob} missing from inventory.example/group_vars/all.yml"
            assert documented[knob] == value, f"{knob}: group_vars and defaults differ"


def _reference_table():
    from importlib import resources

    path = resources.files("pocforge.cluster").joinpath("data/collectives_reference.yaml")
    return yaml.safe_load(path.read_text())


def test_reference_table_has_sources_and_lookup():
    for gpu, scopes in _reference_table().items():
        for scope, ops in scopes.items():
            if scope == "unsourced":
                continue
            for op, entry in ops.items():
                assert entry["busbw_gbs"] > 0 and entry["source"], (gpu, scope, op)
                assert entry["basis"] in ("measured", "expected"), (gpu, scope, op)
    refs = collective_references("MI300X", "roce-400g")
    assert refs["intra_node"]["all_reduce"] == 315.9 and refs["inter_node"]["all_reduce"] == 357.5
    assert collective_references("cpu", "none") == {"intra_node": {}, "inter_node": {}}


def test_every_collective_the_kit_runs_has_a_reference_or_a_reason():
    """Within a node, each collective of collectives_ops on every GPU type of the catalog is
    either referenced (with its source) or listed under ``unsourced`` with why; the kit then
    reports that run as "skipped: no busbw reference", never as passed or failed."""
    from pocforge.catalog import gpu, gpu_names

    ops = yaml.safe_load((PLAYBOOKS / "roles/collectives/defaults/main.yml").read_text())[
        "collectives_ops"
    ]
    table = _reference_table()
    for name in gpu_names():
        if not gpu(name).is_gpu:
            continue
        scopes = table.get(name) or {}
        referenced = scopes.get("intra_node") or {}
        reasons = (scopes.get("unsourced") or {}).get("intra_node") or {}
        for op in ops:
            assert (op in referenced) != (op in reasons), (name, op)
            assert referenced.get(op, {}).get("source") or reasons.get(op), (name, op)
        assert collective_references(name, None)["intra_node"] == {
            op: entry["busbw_gbs"] for op, entry in referenced.items()
        }


def test_nvidia_references_come_from_nvidia_runs():
    """The H100 and H200 references within a node, as published (sources in the table)."""
    assert collective_references("H100", "ib-ndr-400g") == {
        "intra_node": {"all_reduce": 476.0, "all_gather": 370.0, "reduce_scatter": 370.0},
        "inter_node": {},
    }
    assert collective_references("H200", None)["intra_node"] == {"all_reduce": 475.0}
    assert collective_references("B200", None) == {"intra_node": {}, "inter_node": {}}
