"""The variant of a POC a rehearsal runs: its nodes' addresses, its framework in the CPU
nodes' runtime, its model staged from here, and for a storage KV connector the nodes'
shared folder: nothing in it that only this machine has."""

from __future__ import annotations

from pathlib import Path

from pocforge.cli.rehearse import rehearsal_spec
from pocforge.frameworks.base import controller_model, model_path
from pocforge.runtimes.resolve import resolve
from pocforge.spec import load_spec

from ..conftest import REPO

VENV = {
    "kind": "venv",
    "python": "/opt/pocforge/venvs/cpu/bin/python",
    "venv_archive": "/srv/cpu-venv.tar.zst",
}
SHARED = Path("/run/pocforge-rehearse/pfx/shared")


def _variant(poc: str, tmp_path: Path):
    source = REPO / "pocs" / poc / "poc.yaml"
    addresses = ["198.51.100.11", "198.51.100.12"]
    path = rehearsal_spec(source, tmp_path / poc, addresses, VENV, shared=SHARED)
    return load_spec(source), load_spec(path)


def test_the_model_is_staged_from_here_and_the_framework_runs_in_the_nodes_venv(tmp_path):
    original, variant = _variant("tiny-llama-2node-fp32-cpu-vllm", tmp_path)
    assert model_path(variant) == "/opt/pocforge/models/tiny-llama"  # what the launches read
    assert controller_model(variant) == model_path(original)  # what this machine reads
    assert variant.model.weights.source == f"controller:{model_path(original)}"
    for deployment in ("serving", "training"):
        runtime = resolve(variant, deployment)
        assert (runtime.kind, runtime.python) == ("venv", VENV["python"])
    assert [h.address for h in variant.cluster.hosts] == ["198.51.100.11", "198.51.100.12"]


def test_a_storage_kv_connector_passes_the_kv_through_the_nodes_shared_folder(tmp_path):
    _, variant = _variant("tiny-llama-2node-fp32-cpu-vllm-pd", tmp_path)
    disagg = variant.serving.disaggregation
    assert disagg.connector == "ExampleConnector"
    assert disagg.shared_storage_path == str(SHARED / variant.name / "kv")
