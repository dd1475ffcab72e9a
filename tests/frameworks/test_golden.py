"""Launch plans of every example POC (multi-node included), in every runtime it can have,
against golden files: ``<poc>.json`` in the spec's own (default) runtime, and for GPU POCs
``<poc>.venv.json`` with the framework in a venv on the nodes.

Regenerate after an intended change with ``POCFORGE_UPDATE_GOLDEN=1 pytest tests/frameworks``
and review the diff: it is exactly what changes on the customer's cluster.
"""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from pocforge.frameworks import LaunchContext, plan_all
from pocforge.frameworks.base import prepare_model
from pocforge.frameworks.patching.on_nodes import FOLDER as OVERLAY
from pocforge.frameworks.patching.on_nodes import MAP_FILE
from pocforge.runtimes import plan_nodes
from pocforge.spec import load_spec

from ..conftest import REPO

GOLDEN = REPO / "tests" / "frameworks" / "golden"
POCS = sorted(
    p.parent.name for p in (REPO / "pocs").glob("*/poc.yaml") if not p.parent.name.startswith("_")
)


GPU_POCS = [name for name in POCS if "cpu" not in name and name != "demo"]
CASES = [(name, None) for name in POCS] + [(name, "venv") for name in GPU_POCS]


def _in_runtime(spec, kind: str | None):
    if kind is None:
        return spec
    for section in (spec.serving, spec.training):
        if section is not None:
            section.runtime = section.runtime.model_copy(update={"kind": kind})
    return spec


def plan_json(name: str, kind: str | None = None) -> str:
    spec = _in_runtime(load_spec(REPO / "pocs" / name / "poc.yaml"), kind)
    if spec.model.tiny is not None:
        # the model's facts come from its built config.json (a Megatron plan names its
        # vocabulary): build it first, as every run does, so the plan does not depend on
        # whether another test built it already
        prepare_model(spec)
    launches = plan_nodes(spec, LaunchContext(repo=REPO, python="python", sglang_python="python"))
    plans = [launch.as_dict() for launch in launches]
    for plan in plans:  # the patch overlay's code, by digest (its map says what it serves)
        for name, text in plan["files"].items():
            if name.startswith(f"{OVERLAY}/") and not name.endswith(MAP_FILE):
                plan["files"][name] = f"sha256 {hashlib.sha256(text.encode()).hexdigest()}"
    text = json.dumps(plans, indent=2, sort_keys=True) + "\n"
    return text.replace(str(REPO), "<repo>")


@pytest.mark.parametrize(("name", "kind"), CASES)
def test_launch_plan_matches_golden(name, kind):
    golden = GOLDEN / (f"{name}.{kind}.json" if kind else f"{name}.json")
    actual = plan_json(name, kind)
    if os.environ.get("POCFORGE_UPDATE_GOLDEN"):
        golden.write_text(actual)
    assert golden.is_file(), f"no golden file for {name}: run with POCFORGE_UPDATE_GOLDEN=1"
    assert actual == golden.read_text(), (
        f"launch plan of {name} changed; review and regenerate the golden file"
    )


def test_multi_node_layouts():
    """The facts the golden files encode, stated once in words."""
    sglang = json.loads(plan_json("deepseek-v3-fp8-mi355x-sglang", "venv"))
    assert [launch["node_rank"] for launch in sglang] == [0, 1]
    for launch in sglang:
        argv = launch["argv"]
        assert argv[argv.index("--nnodes") + 1] == "2"
        assert argv[argv.index("--node-rank") + 1] == str(launch["node_rank"])
        assert argv[argv.index("--dist-init-addr") + 1] == "198.51.100.11:5000"
        # SGLang 0.5.20 (the POC's image) has no --attn-dp-size (0.5.22 on): DP attention
        # in its own words
        assert argv[argv.index("--dp-size") + 1] == "16" and "--enable-dp-attention" in argv
        assert "--attn-dp-size" not in argv
    assert sglang[1]["health_url"] is None  # only node 0 serves HTTP

    training = json.loads(plan_json("llama-3-8b-bf16-mi300x-deepspeed"))
    # One DeepSpeed launcher per node (--no_ssh): each node starts its own ranks and gets its
    # own copy of the hostfile, the DeepSpeed config and the run file. The POC profiles two
    # steps with rocprofv3: each launcher runs under it (its ranks are its children), with
    # the ROCTx gate first on their PYTHONPATH.
    assert [launch["node_rank"] for launch in training] == [0, 1, 2, 3]
    for launch in training:
        argv = launch["argv"]
        framework = argv.index("/opt/pocforge/venvs/deepspeed/bin/python")
        assert argv[framework : framework + 3] == [
            "/opt/pocforge/venvs/deepspeed/bin/python",
            "-m",
            "deepspeed.launcher.runner",
        ]
        assert argv[:2] == ["rocprofv3", "--selected-regions"]
        assert argv[argv.index("--pmc") + 1 : argv.index("--")] == ["SQ_WAVES", "GRBM_GUI_ACTIVE"]
        assert "--no_ssh" in argv and f"--node_rank={launch['node_rank']}" in argv
        assert "--num_nodes=4" in argv and "--master_addr=198.51.100.21" in argv
        assert set(launch["files"]) == {
            "hostfile",
            "ds_config.json",
            "run.json",
            "roctx-site/sitecustomize.py",
        }
        assert json.loads(launch["files"]["run.json"])["profile_tool"] == "rocprofv3"
    launcher = training[0]
    assert launcher["files"]["hostfile"].splitlines() == [
        f"198.51.100.2{i} slots=8" for i in range(1, 5)
    ]
    ds = json.loads(launcher["files"]["ds_config.json"])
    assert ds["zero_optimization"]["stage"] == 3 and ds["bf16"] == {"enabled": True}


def test_vllm_multi_node_layouts(tmp_path, good_spec_file):
    """TP across nodes goes through Ray; DP across nodes uses vLLM's native headless ranks."""
    ray = plan_all(load_spec(good_spec_file(tp=16, dp=1)), LaunchContext(repo=REPO))
    assert [launch.role for launch in ray] == ["ray-head", "ray-worker", "server"]
    assert "--distributed-executor-backend" in ray[-1].argv

    native = plan_all(load_spec(good_spec_file(tp=8, dp=2)), LaunchContext(repo=REPO))
    assert [launch.role for launch in native] == ["server", "headless"]
    assert native[1].argv[native[1].argv.index("--data-parallel-start-rank") + 1] == "1"
    assert "--headless" in native[1].argv and native[1].health_url is None
    # the API servers' own options only where they run (vLLM refuses them with --headless)
    spec = load_spec(good_spec_file(tp=8, dp=2, engine_args={"api-server-count": 1}))
    head, headless = (launch.argv for launch in plan_all(spec, LaunchContext(repo=REPO)))
    assert head[head.index("--api-server-count") + 1] == "1"
    assert "--api-server-count" not in headless and "--tensor-parallel-size" in headless


def test_gpu_pocs_run_in_the_vendors_container_with_its_device_flags():
    """AMD: /dev/kfd, /dev/dri, video group, seccomp and ptrace; host IPC and network; the
    framework's own argv unchanged inside; no CPU default (.venv, localhost) in the plan."""
    vllm = json.loads(plan_json("llama-3.1-70b-bf16-mi300x-vllm"))
    for launch in vllm:
        argv = launch["argv"]
        assert argv[:3] == ["docker", "run", "--rm"]
        for flag in ("/dev/kfd", "/dev/dri", "video", "seccomp=unconfined", "SYS_PTRACE"):
            assert flag in argv
        assert (
            argv[argv.index("--ipc") + 1] == "host" and argv[argv.index("--network") + 1] == "host"
        )
        inner = launch["runtime"]["inner_argv"]
        image = launch["runtime"]["image"]
        assert (
            image == "vllm/vllm-openai-rocm:v0.27.1"
            and argv[argv.index(image) + 1 :][-len(inner) :] == inner
        )
        assert inner[0] == "python3"
        text = json.dumps(launch)
        assert ".venv" not in text and "127.0.0.1" not in text and "localhost" not in text
    sglang = json.loads(plan_json("deepseek-v3-fp8-mi355x-sglang"))
    assert {one["runtime"]["image"] for one in sglang} == {
        "lmsysorg/sglang-rocm:v0.5.20-rocm724-mi35x-20260920"  # gfx950's build for MI355X
    }


@pytest.mark.parametrize(("name", "kind"), [case for case in CASES if case[0] in GPU_POCS])
def test_a_gpu_plan_names_nothing_of_this_machine(name, kind):
    """A GPU node shares nothing with the controller: no launch of an example GPU POC, in
    any runtime, names the checkout, the kit's environments, this machine's interpreter or
    home, or a loopback address where it spans nodes (as planned on a laptop, the way
    ``launch --print`` and the cluster stage plan it)."""
    import sys
    from pathlib import Path

    from pocforge.paths import workspace_root

    spec = _in_runtime(load_spec(REPO / "pocs" / name / "poc.yaml"), kind)
    launches = plan_nodes(spec, LaunchContext.local(workspace_root()))
    here = {str(REPO), str(workspace_root()), ".venv", sys.executable, str(Path.home())}
    multi_node = len({launch.node_rank for launch in launches}) > 1
    for launch in launches:
        text = json.dumps(launch.as_dict())
        leaked = sorted(h for h in here if h in text)
        assert not leaked, f"{name} node {launch.node_rank} {launch.role}: {leaked}"
        if multi_node:
            assert "127.0.0.1" not in text and "localhost" not in text, (name, launch.role)
