"""A scripted streaming server: a measurement instrument with a known TTFT and ITL.

It answers ``/v1/completions`` and ``/v1/chat/completions`` with SSE streams shaped like
vLLM's: the first token ``ttft_ms`` after the request handler starts, then one token every
``itl_ms`` (on an absolute schedule, so lateness never accumulates), ``max_tokens`` tokens,
a usage-only final event when ``stream_options.include_usage`` is set, then ``[DONE]``.

It also reports its own error: for every chunk, how late it was written against the
schedule and the gaps it actually wrote (``GET /lag``: first-chunk and later-chunk
lateness, gaps; reset with ``POST /lag/reset``). The truth a client should measure is the scripted value plus the server's
lateness, so the client's own error can be told apart from the server's. It is not a
stand-in for vLLM: no tokenizer, no batching; ``/metrics`` exposes two counters only.

Run: ``python -m pocforge.bench.instrument --port 8100 --ttft-ms 100 --itl-ms 20``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

from aiohttp import web

_TOKEN = " tok"


class Instrument:
    def __init__(self, ttft_ms: float, itl_ms: float, fail_after: int | None = None):
        self.ttft_s = ttft_ms / 1000.0
        self.itl_s = itl_ms / 1000.0
        self.fail_after = fail_after
        self.first_lag_ms: list[float] = []
        self.next_lag_ms: list[float] = []
        self.gaps_ms: list[float] = []
        self.requests = 0
        self.chunks = 0

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"object": "list", "data": [{"id": "instrument", "object": "model"}]}
        )

    async def metrics(self, request: web.Request) -> web.Response:
        text = (
            "# TYPE vllm:request_success_total counter\n"
            f"vllm:request_success_total {self.requests}\n"
            "# TYPE vllm:generation_tokens_total counter\n"
            f"vllm:generation_tokens_total {self.chunks}\n"
        )
        return web.Response(text=text, content_type="text/plain")

    async def lag(self, request: web.Request) -> web.Response:
        return web.json_response({"first_ms": self.first_lag_ms, "next_ms": self.next_lag_ms,
                                  "gaps_ms": self.gaps_ms,
                                  "requests": self.requests, "chunks": self.chunks})  # fmt: skip

    async def reset(self, request: web.Request) -> web.Response:
        self.first_lag_ms, self.next_lag_ms, self.gaps_ms = [], [], []
        return web.json_response({"ok": True})

    async def stream(self, request: web.Request) -> web.StreamResponse:
        t0 = time.perf_counter()
        body = await request.json()
        chat = request.path.endswith("/chat/completions")
        n = int(body.get("max_tokens") or 16)
        usage = bool((body.get("stream_options") or {}).get("include_usage"))
        if self.fail_after is not None and self.requests >= self.fail_after:
            raise web.HTTPServiceUnavailable(text="instrument: failing as configured")
        self.requests += 1
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        head = ('{"id":"x","object":"chat.completion.chunk","model":"instrument","choices":[{"index":0,"delta":{"content":"'
                if chat else
                '{"id":"x","object":"text_completion","model":"instrument","choices":[{"index":0,"text":"')  # fmt: skip
        tail = '"},"finish_reason":null}]}' if chat else '","finish_reason":null}]}'
        event = f"data: {head}{_TOKEN}{tail}\n\n".encode()
        clock, sleep = time.perf_counter, asyncio.sleep
        prev = 0.0
        for i in range(n):
            due = t0 + self.ttft_s + i * self.itl_s
            delay = due - clock()
            if delay > 0:
                await sleep(delay)
            now = clock()
            await resp.write(event)
            if i:
                self.next_lag_ms.append((now - due) * 1000.0)
                self.gaps_ms.append((now - prev) * 1000.0)
            else:
                self.first_lag_ms.append((now - due) * 1000.0)
            prev = now
            self.chunks += 1
        tailer = b""
        if usage:
            u = {"prompt_tokens": 1, "completion_tokens": n, "total_tokens": n + 1}
            tailer += f"data: {json.dumps({'id': 'x', 'choices': [], 'usage': u})}\n\n".encode()
        await resp.write(tailer + b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp


def make_app(ttft_ms: float, itl_ms: float, fail_after: int | None = None) -> web.Application:
    inst = Instrument(ttft_ms, itl_ms, fail_after)
    app = web.Application()
    app["instrument"] = inst
    app.router.add_get("/v1/models", inst.models)
    app.router.add_get("/metrics", inst.metrics)
    app.router.add_get("/lag", inst.lag)
    app.router.add_post("/lag/reset", inst.reset)
    app.router.add_post("/v1/completions", inst.stream)
    app.router.add_post("/v1/chat/completions", inst.stream)
    return app


@contextlib.contextmanager
def running_instrument(ttft_ms: float, itl_ms: float, fail_after: int | None = None,
                       port: int | None = None) -> Iterator[str]:  # fmt: skip
    """Start the instrument in its own process (own core time, own event loop); yield its URL.

    Stopped by pid (its own process group) on exit, also when the body raises.
    """
    from pocforge.frameworks.process import free_port  # here: the server process needs none of it

    port = port or free_port()
    cmd = [sys.executable, "-m", "pocforge.bench.instrument", "--port", str(port),
           "--ttft-ms", str(ttft_ms), "--itl-ms", str(itl_ms)]  # fmt: skip
    if fail_after is not None:
        cmd += ["--fail-after", str(fail_after)]
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(url + "/v1/models", timeout=1).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    err = proc.stderr.read().decode() if proc.stderr else ""
                    raise RuntimeError(f"instrument did not start: {err[-500:]}") from None
                time.sleep(0.1)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--ttft-ms", type=float, default=100.0)
    ap.add_argument("--itl-ms", type=float, default=20.0)
    ap.add_argument("--fail-after", type=int, default=None, help="answer 503 after N requests")
    args = ap.parse_args(argv)
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    web.run_app(make_app(args.ttft_ms, args.itl_ms, args.fail_after), host=args.host,
                port=args.port, print=None, access_log=None, backlog=4096)  # fmt: skip


if __name__ == "__main__":
    main()
