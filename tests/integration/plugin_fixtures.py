"""Helpers for the kernel-plugin tests: serve the tiny model through the kit's adapter (or
query the session's plain server on it), collect greedy completions and the server's log,
and read the proof lines."""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from pocforge.frameworks.process import ManagedProcess

from ..servers import base_url, needs, start_server

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


@dataclass
class Run:
    """One server to start and query: ``serving`` holds :func:`tests.servers.start_server`'s
    keywords (kernels, engine_args...)."""

    framework: str
    folder: Path
    model: Path
    query: Callable[[str], list[dict]]
    serving: dict = field(default_factory=dict)


def serve_and_query(*runs: Run, timeout_s: float = 600) -> list[Served]:
    """Start every run's server at once, run its ``query(base_url)`` once it is healthy, and
    stop them all. A start is mostly one process at a time importing on one core, so on
    two cores two servers are up in little more than the time of one."""
    for run in runs:
        needs(run.framework)
    processes: list[ManagedProcess] = []
    answers = []
    try:
        for run in runs:
            processes.append(start_server(run.framework, run.folder, run.model, **run.serving))
        for run, process in zip(runs, processes, strict=True):
            process.wait_healthy(timeout_s=timeout_s)
            answers.append((run.query(base_url(process)), set(process.live_group_members())))
    finally:
        with ThreadPoolExecutor() as pool:  # each stop may wait out its grace period
            list(pool.map(ManagedProcess.stop, processes))
    return [
        Served(process.log_file.read_text(errors="replace"), outputs, process.pid, group)
        for process, (outputs, group) in zip(processes, answers, strict=True)
    ]


def query_running(process: ManagedProcess, query) -> Served:
    """Run ``query(base_url)`` on a server that stays up (a session's shared one): its
    outputs, its group while serving, and its log so far, the queries' lines included."""
    outputs = query(base_url(process))
    group = set(process.live_group_members())
    return Served(process.log_file.read_text(errors="replace"), outputs, process.pid, group)
