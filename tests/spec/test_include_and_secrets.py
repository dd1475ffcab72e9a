"""``include:`` inheritance (deep merge, lists replace) and ``${ENV}`` secrets."""

from __future__ import annotations

import json

import pytest
import yaml

from pocforge.spec import SpecError, load_spec, public_dump


def write_base(tmp_path, good, name="base"):
    good["poc"]["name"] = name
    path = tmp_path / name / "poc.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump(good, sort_keys=False))
    return path


def test_include_deep_merges_and_lists_replace(tmp_path, good):
    write_base(tmp_path, good)
    child = tmp_path / "variant" / "poc.yaml"
    child.parent.mkdir()
    child.write_text(
        "include: ../base/poc.yaml\n"
        "poc: {name: variant}\n"
        "cluster: {gpu: MI355X}\n"
        "acceptance:\n  criteria: ['serving.chat.ttft_ms.p50 <= 500']\n"
    )
    spec = load_spec(child)
    assert spec.poc.name == "variant" and spec.poc.customer == "ACME"  # merged mapping
    assert spec.cluster.gpu == "MI355X" and spec.cluster.gpus_per_node == 8
    assert [str(c) for c in spec.acceptance.criteria] == [
        "serving.chat.ttft_ms.p50 <= 500"
    ]  # replaced


def test_errors_in_an_included_value_point_at_the_file_that_wrote_it(tmp_path, good):
    good["cluster"]["gpus_per_node"] = 4  # breaks the serving rule (tp 8 on 4 GPUs)
    write_base(tmp_path, good)
    child = tmp_path / "variant" / "poc.yaml"
    child.parent.mkdir()
    child.write_text("include: ../base\npoc: {name: variant}\ncluster: {nodes: 1}\n")
    with pytest.raises(SpecError) as info:
        load_spec(child)
    (problem,) = info.value.problems
    assert problem.path == "serving.parallelism" and problem.file.name == "poc.yaml"
    assert problem.file.parent.name == "base"


def test_include_cycle_is_named(tmp_path):
    a, b = tmp_path / "a" / "poc.yaml", tmp_path / "b" / "poc.yaml"
    a.parent.mkdir()
    b.parent.mkdir()
    a.write_text("include: ../b/poc.yaml\n")
    b.write_text("include: ../a/poc.yaml\n")
    with pytest.raises(
        SpecError, match=r"include cycle: .*a/poc.yaml -> .*b/poc.yaml -> .*a/poc.yaml"
    ):
        load_spec(a)


def test_missing_include(tmp_path):
    a = tmp_path / "a" / "poc.yaml"
    a.parent.mkdir()
    a.write_text("include: ../nowhere/poc.yaml\n")
    with pytest.raises(
        SpecError, match=r"poc.yaml:1: include: included file '../nowhere/poc.yaml' does not exist"
    ):
        load_spec(a)


@pytest.mark.parametrize("value", ["3", "[1, 2]", "''"])
def test_include_must_be_paths(tmp_path, value):
    a = tmp_path / "a" / "poc.yaml"
    a.parent.mkdir()
    a.write_text(f"include: {value}\n")
    with pytest.raises(SpecError, match="include: must be a path or a list of paths"):
        load_spec(a)


def test_secret_from_env_is_used_but_never_shown(load, good, monkeypatch):
    monkeypatch.setenv("POCFORGE_TEST_TOKEN", "canary-8c1f")
    good["model"]["hf_token"] = "${POCFORGE_TEST_TOKEN}"
    spec = load(good)
    assert spec.model.hf_token.get_secret_value() == "canary-8c1f"
    assert "canary-8c1f" not in json.dumps(public_dump(spec)) and "canary-8c1f" not in repr(spec)


def test_unset_secret_loads_but_is_required_before_use(load, good, monkeypatch):
    monkeypatch.delenv("POCFORGE_UNSET_TOKEN", raising=False)
    good["model"]["hf_token"] = "${POCFORGE_UNSET_TOKEN}"
    spec = load(good)
    with pytest.raises(
        SpecError, match="model.hf_token: environment variable POCFORGE_UNSET_TOKEN is not set"
    ):
        spec.require_secrets()


def test_env_interpolation_refused_outside_secret_fields(load, good, monkeypatch):
    monkeypatch.setenv("POCFORGE_TEST_GPU", "MI300X")
    good["cluster"]["gpu"] = "${POCFORGE_TEST_GPU}"
    with pytest.raises(
        SpecError, match=r"cluster.gpu: \$\{…\} interpolation is only allowed in secret fields"
    ):
        load(good)


def test_ssh_password_is_secret_capable(load, good, monkeypatch):
    monkeypatch.setenv("POCFORGE_TEST_PW", "pw-canary")
    good["cluster"]["ssh"] = {"password": "${POCFORGE_TEST_PW}"}
    assert load(good).cluster.ssh.password.get_secret_value() == "pw-canary"


def test_runtime_env_takes_a_secret_as_a_reference_kept_as_written(load, good, monkeypatch):
    monkeypatch.setenv("POCFORGE_TEST_KEY", "key-canary-51")
    good["serving"].setdefault("runtime", {})["env"] = {"WANDB_API_KEY": "${POCFORGE_TEST_KEY}"}
    spec = load(good)
    assert spec.serving.runtime.env == {"WANDB_API_KEY": "${POCFORGE_TEST_KEY}"}
    assert "key-canary-51" not in json.dumps(public_dump(spec))


def test_a_reference_in_runtime_env_is_the_whole_value(load, good):
    good["serving"].setdefault("runtime", {})["env"] = {"TOKEN": "Bearer ${POCFORGE_TEST_KEY}"}
    with pytest.raises(SpecError, match=r"serving.runtime.env.TOKEN: a secret here is a reference"):
        load(good)
