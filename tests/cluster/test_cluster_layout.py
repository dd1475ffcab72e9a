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


def test_reference_table_has_sources_and_lookup():
    from importlib import resources

    table = yaml.safe_load(
        resources.files("pocforge.cluster").joinpath("data/collectives_reference.yaml").read_text()
    )
    for gpu, scopes in table.items():
        for scope, ops in scopes.items():
            for op, entry in ops.items():
                assert entry["busbw_gbs"] > 0 and entry["source"], (gpu, scope, op)
    refs = collective_references("MI300X", "roce-400g")
    assert refs["intra_node"]["all_reduce"] == 315.9 and refs["inter_node"]["all_reduce"] == 357.5
    assert collective_references("cpu", "none") == {"intra_node": {}, "inter_node": {}}
