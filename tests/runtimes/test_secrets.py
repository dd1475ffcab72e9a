"""Secrets by reference: a gated hub model's token and ``runtime.env``'s ``${NAME}``
references reach each node's launches from the node (its environment, or the 0600 file
bring-up writes), never as a value in a command line, a printed launch or a plan."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from pocforge.cluster.inventory import expectations_from_spec
from pocforge.frameworks import LaunchContext
from pocforge.frameworks.launch_plan import NodeLaunch
from pocforge.frameworks.process import StartFailed, node_secrets
from pocforge.runtimes.plan import plan_nodes
from pocforge.spec import load_spec

from ..conftest import REPO

TOKEN, KEY = "hf_canaryToken0123456789", "wb-canary-key-9876"


@pytest.fixture
def gated(tmp_path, monkeypatch):
    """The 70B vLLM POC as a gated hub model (no staged weights) with its token from the
    environment, and one more secret by reference in serving.runtime.env."""
    monkeypatch.setenv("POCFORGE_TEST_HF", TOKEN)
    monkeypatch.setenv("POCFORGE_TEST_WB", KEY)
    name = "gated-llama-bf16-mi300x-vllm"
    source = REPO / "pocs" / "llama-3.1-70b-bf16-mi300x-vllm"
    data = yaml.safe_load((source / "poc.yaml").read_text())
    data["poc"]["name"] = name
    data["model"].pop("weights", None)
    data["model"]["hf_token"] = "${POCFORGE_TEST_HF}"
    data["serving"].setdefault("runtime", {})["env"] = {"WANDB_API_KEY": "${POCFORGE_TEST_WB}"}
    folder = tmp_path / name
    folder.mkdir()
    (folder / "poc.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    for extra in source.iterdir():
        if extra.name != "poc.yaml" and extra.is_file():
            (folder / extra.name).write_text(extra.read_text())
    return load_spec(folder / "poc.yaml")


def test_the_nodes_launches_name_their_secrets_and_hold_no_value(gated):
    launches = plan_nodes(gated, LaunchContext(repo=Path("/nowhere")))
    assert launches
    for launch in launches:
        assert launch.secrets == ["HF_TOKEN", "WANDB_API_KEY"]
        assert launch.secrets_file == "/opt/pocforge/secrets/gated-llama-bf16-mi300x-vllm.env"
        argv = launch.argv
        assert argv[argv.index("HF_TOKEN") - 1] == "--env"  # no value: the engine's own
        assert argv[argv.index("WANDB_API_KEY") - 1] == "--env"
        planned = json.dumps(launch.as_dict())
        assert TOKEN not in planned and KEY not in planned and "${POCFORGE_TEST" not in planned


def test_bring_up_writes_the_values_for_the_nodes(gated):
    extra = expectations_from_spec(gated).extra
    assert extra["poc_folder_secrets"] == {"HF_TOKEN": TOKEN, "WANDB_API_KEY": KEY}
    assert extra["poc_folder_secrets_file"].endswith("/gated-llama-bf16-mi300x-vllm.env")


def test_weights_staged_on_the_nodes_need_no_token_at_launch(monkeypatch):
    monkeypatch.setenv("POCFORGE_TEST_HF", TOKEN)
    spec = load_spec(REPO / "pocs" / "llama-3.1-70b-bf16-mi300x-vllm" / "poc.yaml")
    assert spec.model.weights is not None
    for launch in plan_nodes(spec, LaunchContext(repo=Path("/nowhere"))):
        assert launch.secrets == [] and "HF_TOKEN" not in launch.argv


def launch_taking(names: list[str], file: Path) -> NodeLaunch:
    return NodeLaunch(
        "serving", "vllm", 0, "node0", "server", ["true"], secrets=names, secrets_file=str(file)
    )


def test_a_node_takes_a_secret_from_its_environment_else_from_the_file(tmp_path, monkeypatch):
    file = tmp_path / "poc.env"
    file.write_text(f"HF_TOKEN={TOKEN}\nWANDB_API_KEY=from-file\n")
    os.chmod(file, 0o600)
    monkeypatch.setenv("WANDB_API_KEY", "from-node")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    found = node_secrets(launch_taking(["HF_TOKEN", "WANDB_API_KEY"], file))
    assert found == {"HF_TOKEN": TOKEN, "WANDB_API_KEY": "from-node"}


def test_a_secret_the_node_lacks_is_named_with_where_it_was_looked_for(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    file = tmp_path / "poc.env"
    with pytest.raises(StartFailed, match=rf"takes HF_TOKEN by reference.*{file}"):
        node_secrets(launch_taking(["HF_TOKEN"], file))


def test_the_container_keeps_its_name(gated):
    for launch in plan_nodes(gated, LaunchContext(repo=Path("/nowhere"))):
        name = launch.runtime["name"]
        assert (
            name.startswith("pocforge-gated-")
            and launch.argv[launch.argv.index("--name") + 1] == name
        )
