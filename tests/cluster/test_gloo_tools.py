"""The kit's gloo benchmark as each CPU node runs it: in the POC's own runtime (the node's
venv, or a container of its image), never in this machine's environment."""

from __future__ import annotations

import shlex

from pocforge.cluster.gloo_tools import PASSED, gloo_tools
from pocforge.spec import load_spec

from ..conftest import REPO

POC = REPO / "pocs" / "tiny-llama-2node-fp32-cpu-vllm" / "poc.yaml"
PYTHON = "/opt/pocforge/venvs/cpu/bin/python"


def _spec(**runtime):
    spec = load_spec(POC)
    spec.serving.runtime = spec.serving.runtime.model_copy(update=runtime)
    return spec


def _argv(script: str) -> list[str]:
    shebang, line = script.splitlines()
    assert shebang == "#!/bin/sh" and line.startswith("exec ") and line.endswith(' "$@"')
    return shlex.split(line.removeprefix("exec ").removesuffix(' "$@"'))


def test_in_a_venv_each_op_runs_with_the_nodes_interpreter():
    tools = gloo_tools(_spec(kind="venv", python=PYTHON, venv_archive="env.tar.zst"))
    assert set(tools) == {"all_reduce_perf", "all_gather_perf", "alltoall_perf"}
    argv = _argv(tools["all_gather_perf"])
    assert argv == [PYTHON, "-m", "pocforge.cluster.gloo_perf", "all_gather"]


def test_in_a_container_each_rank_is_a_container_of_the_image_named_for_its_rank():
    image = "localhost/pocforge-cpu:test"
    script = gloo_tools(_spec(kind="container", engine="podman", image=image, python=PYTHON))[
        "all_reduce_perf"
    ]
    argv = _argv(script)
    assert argv[:3] == ["podman", "run", "--rm"]
    assert "--name pocforge-tiny-llama-2node-fp32-cpu-vllm-" in script
    assert '-"$OMPI_COMM_WORLD_RANK" ' in script  # two ranks on one node, two names
    assert all(f"--env {name}" in script for name in PASSED)  # values from mpirun's process
    assert argv[argv.index("--network") : argv.index("--network") + 2] == ["--network", "host"]
    assert "/opt/pocforge/wheels:/opt/pocforge/wheels:ro" in argv
    # the kit installed from the mounted wheels, then the benchmark in the image's Python
    at = argv.index(image)
    assert argv[at + 1 : at + 3] == ["sh", "-c"] and "--no-index" in argv[at + 3]
    assert argv[-4:] == [PYTHON, "-m", "pocforge.cluster.gloo_perf", "all_reduce"]
