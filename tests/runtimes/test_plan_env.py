"""The POC's ``runtime.env`` on every launch of a deployment, in every runtime, whether or not
bring-up's facts are in the run: a stage run alone (``pocforge run --only serving`` after an
earlier bring-up) has none, and its launches still carry what the POC set."""

from __future__ import annotations

from pathlib import Path

import pytest

from pocforge.frameworks import LaunchContext
from pocforge.runtimes.plan import plan_deployment
from pocforge.spec import load_spec

REPO = Path(__file__).resolve().parents[2]
CTX = LaunchContext(repo=REPO, python="python")


def _env(launch) -> dict[str, str]:
    """A launch's environment: its own, or in a container the engine's ``--env`` flags."""
    if (launch.runtime or {}).get("kind") != "container":
        return launch.env
    flags = [launch.argv[i + 1] for i, arg in enumerate(launch.argv) if arg == "--env"]
    return dict(flag.split("=", 1) for flag in flags)


@pytest.mark.parametrize("kind", ["kit", "venv", "container"])
def test_the_pocs_runtime_env_reaches_each_launch_with_or_without_bringups_facts(kind):
    spec = load_spec(REPO / "pocs" / "tiny-llama-2node-fp32-cpu-vllm-pd" / "poc.yaml")
    spec.serving.runtime.kind = kind
    if kind == "container":
        spec.serving.runtime.image = "localhost/pocforge-cpu:1"
    if kind == "venv":  # a CPU node's: shipped, not built (runtime.venv_archive)
        spec.serving.runtime.python = "/opt/pocforge/venvs/cpu/bin/python"
    spec.serving.runtime.env = {"POCFORGE_POC_VAR": "poc", "VLLM_LOGGING_LEVEL": "ERROR"}
    alone = plan_deployment(spec, "serving", CTX)
    assert len(alone) >= 2
    for launch in alone:  # no facts: the POC's own variables, the framework's over them
        assert _env(launch)["POCFORGE_POC_VAR"] == "poc", (kind, launch.name)
    # the platform's variables (bring-up's facts, with the POC's over them) and the
    # caller's: node 1's value replaces the POC's there only
    node_env = {0: {"POCFORGE_POC_VAR": "poc"}, 1: {"POCFORGE_POC_VAR": "node 1"}}
    placed = plan_deployment(spec, "serving", CTX, node_env=node_env)
    assert {(one.node_rank, _env(one)["POCFORGE_POC_VAR"]) for one in placed} == {
        (0, "poc"),
        (1, "node 1"),
    }
