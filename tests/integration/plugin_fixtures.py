"""Helpers for the kernel-plugin tests: serve the tiny model through the kit's adapter,
collect greedy completions and the server's log, stop it, and read the proof lines."""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pocforge.frameworks import ADAPTERS, LaunchContext
from pocforge.frameworks.process import ManagedProcess, free_port
from pocforge.spec import load_spec

from ..conftest import REPO
from ..frameworks.conftest import cpu_serving_spec

PROMPTS = ("The kit", "hello world", "a b c d e")
MAX_TOKENS = 8
# "pocforge-kernels: <message> (pid N)", as kernels/pocforge_kernels/integrations/vllm_plugin.say writes it.
PROOF_LINE = re.compile(r"^pocforge-kernels: (?P<message>.*) \(pid (?P<pid>\d+)\)$", re.M)


@dataclass
class Served:
    """What one server run left behind: its greedy outputs, log text and process ids."""

    log: str
    outputs: list[dict]
    server_pid: int
    group_pids: set[int] = field(default_factory=set)
    after: object = None  # what serve_and_query's ``after(process)`` returned

    def proof(self) -> dict[str, int]:
        """Proof message -> pid of the process that wrote it."""
        return {m["message"]: int(m["pid"]) for m in PROOF_LINE.finditer(self.log)}


def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=300) as response:
        return json.loads(response.read())


def greedy(base: str, model: str = "tiny", token_ids: bool = True) -> list[dict]:
    """Tokens (ids, else their text) and log-probabilities of a greedy completion per prompt."""
    outputs = []
    for prompt in PROMPTS:
        body = {
            "model": model,
            "prompt": prompt,
            "max_tokens": MAX_TOKENS,
            "temperature": 0,
            "logprobs": 1,
        }
        if token_ids:
            body["return_token_ids"] = True  # vLLM's extension
        choice = post(f"{base}/v1/completions", body)["choices"][0]
        outputs.append(
            {
                "tokens": choice["token_ids"] if token_ids else choice["logprobs"]["tokens"],
                "logprobs": choice["logprobs"]["token_logprobs"],
            }
        )
    return outputs


def serve_and_query(
    framework: str,
    folder: Path,
    model: Path,
    query,
    *,
    kernels: list[str] | None = None,
    engine_args: dict | None = None,
    extra_env: dict[str, str] | None = None,
    timeout_s: float = 600,
    after: Callable[[ManagedProcess], object] | None = None,
) -> Served:
    """Start ``framework`` on ``model`` through its adapter, run ``query(base_url)``, stop it.

    ``after(process)`` runs on the still-running server once ``query`` is done (a test that
    kills it, say); the server is stopped either way.
    """
    serving = {"engine_args": engine_args or {}}
    if kernels:
        serving["kernels"] = kernels
    spec = load_spec(cpu_serving_spec(folder, model, framework, **serving))
    ctx = LaunchContext.local(
        REPO, host_override="127.0.0.1", port=free_port(), extra_env=dict(extra_env or {})
    )
    (launch,) = ADAPTERS[framework].plan(spec, ctx)
    log_file = folder / f"{framework}.log"
    process = ManagedProcess(launch, log_file).start()
    try:
        process.wait_healthy(timeout_s=timeout_s)
        outputs = query(launch.health_url.rsplit("/", 1)[0])
        group = set(process.live_group_members())
        result = after(process) if after is not None else None
    finally:
        process.stop()
    return Served(log_file.read_text(errors="replace"), outputs, process.pid, group, result)
