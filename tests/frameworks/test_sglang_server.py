"""The SGLang adapter starts SGLang's CPU engine (its own environment) on the tiny model:
it serves completions and chat, stops its whole process group, and a killed server is
reported as a crash with its log tail."""

from __future__ import annotations

import json
import os
import signal
import urllib.request

import pytest

from pocforge.frameworks import ADAPTERS, LaunchContext
from pocforge.frameworks.process import ManagedProcess, ServerCrashed, free_port
from pocforge.spec import load_spec

from ..conftest import REPO
from .conftest import cpu_serving_spec

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
SGLANG_PYTHON = REPO / ".venv-sglang" / "bin" / "python"


def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read())


@pytest.fixture(scope="module")
def sglang(tiny_llama, tmp_path_factory):
    if not SGLANG_PYTHON.exists():
        pytest.skip("no .venv-sglang (run make setup)")
    folder = tmp_path_factory.mktemp("sglang")
    spec = load_spec(
        cpu_serving_spec(folder, tiny_llama, "sglang", engine_args={"max-running-requests": 4})
    )
    ctx = LaunchContext.local(REPO, host_override="127.0.0.1", port=free_port())
    (launch,) = ADAPTERS["sglang"].plan(spec, ctx)
    process = ManagedProcess(launch, folder / "sglang.log").start()
    try:
        process.wait_healthy(timeout_s=400)
        yield process
    finally:
        process.stop()


def test_serves_completions_and_chat(sglang):
    base = sglang.launch.health_url.rsplit("/", 1)[0]
    completion = post(
        f"{base}/v1/completions",
        {"model": "tiny", "prompt": "hello", "max_tokens": 4, "temperature": 0},
    )
    assert completion["usage"]["completion_tokens"] == 4
    chat = post(
        f"{base}/v1/chat/completions",
        {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3},
    )
    assert (
        chat["choices"][0]["message"]["role"] == "assistant"
        and chat["usage"]["completion_tokens"] == 3
    )
    log = sglang.log_file.read_text()
    assert (
        "SGLANG_USE_CPU_ENGINE=1" in log.splitlines()[0]
        and "--sleep-on-idle" in log.splitlines()[0]
    )


def test_killed_server_is_reported_as_a_crash_with_its_log(sglang):
    os.kill(sglang.pid, signal.SIGKILL)
    sglang.proc.wait(timeout=30)
    with pytest.raises(ServerCrashed) as info:
        sglang.check_alive()
    assert info.value.exit_code == -signal.SIGKILL
    assert (
        "fired up and ready to roll" in info.value.log_tail
        or "/v1/chat/completions" in info.value.log_tail
    )
    sglang.stop()  # ends the scheduler and detokenizer the killed launcher may leave behind
    assert sglang.live_group_members() == []
