"""The kit's prefill/decode router: one OpenAI endpoint in front of a disaggregated deployment.

Each completion request goes to a prefill instance and then to a decode instance (round
robin over each pool), in the protocol of the deployment's KV connection:

- ``ExampleConnector`` (vLLM's shared-storage connector): the prefill instance answers the
  request cut to one output token (and writes the prompt's KV to the shared path); the
  decode instance then gets the original request and finds that KV there;
- ``NixlConnector``, ``MooncakeConnector``, ``MoRIIOConnector``, ``LMCacheConnectorV1``
  (vLLM's proxy pattern, as its ``toy_proxy_server.py``): the prefill request carries
  ``kv_transfer_params: {do_remote_decode: true}``; its answer's ``kv_transfer_params``
  (engine id, block ids, host, port) go with the original request to decode, which pulls
  the KV;
- ``sglang``: the request, with ``bootstrap_host``/``bootstrap_port``/``bootstrap_room``
  added, goes to the prefill and the decode instance at once (SGLang's mini load balancer);
  decode's answer is the client's.

The decode answer streams back to the client as it comes. ``/metrics`` is the router's own
counters (``pocforge_router:``: requests, prefill and decode failures, the prefill time and
decode's time to first byte — the TTFT split) followed by every instance's own metrics,
each sample labelled ``pocforge_pool`` and ``pocforge_instance``, so one scrape reads the
whole deployment. ``/health`` is 200 once every instance's is.

Written on aiohttp alone (no kit import) so it runs beside the framework on a node, in
the framework's own environment or container (both have aiohttp: vLLM and SGLang need it).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import re
import time
from dataclasses import dataclass, field
from urllib.parse import urlparse

from aiohttp import ClientSession, ClientTimeout, web

KV_PARAMS_PROTOCOLS = (
    "NixlConnector",
    "MooncakeConnector",
    "MoRIIOConnector",
    "LMCacheConnectorV1",
)
PROTOCOLS = ("ExampleConnector", *KV_PARAMS_PROTOCOLS, "sglang")
PREFIX = "pocforge_router:"


@dataclass
class Counters:
    requests: int = 0
    prefill_failures: int = 0
    decode_failures: int = 0
    prefill_seconds: float = 0.0
    prefill_count: int = 0
    decode_first_byte_seconds: float = 0.0
    decode_first_byte_count: int = 0

    def exposition(self) -> str:
        lines = []
        for name, kind, help_text, samples in (
            ("requests_total", "counter", "Completion requests routed.", [self.requests]),
            (
                "prefill_failures_total",
                "counter",
                "Prefill answers that were not 200.",
                [self.prefill_failures],
            ),
            (
                "decode_failures_total",
                "counter",
                "Decode answers that were not 200.",
                [self.decode_failures],
            ),
            (
                "transfer_failures_total",
                "counter",
                "Requests whose prefill or decode failed.",
                [self.prefill_failures + self.decode_failures],
            ),
        ):
            lines += [f"# HELP {PREFIX}{name} {help_text}", f"# TYPE {PREFIX}{name} {kind}"]
            lines += [f"{PREFIX}{name} {value}" for value in samples]
        for name, help_text, total, count in (
            (
                "prefill_seconds",
                "Prefill request time (sends to its answer).",
                self.prefill_seconds,
                self.prefill_count,
            ),
            (
                "decode_first_byte_seconds",
                "Decode request sent to its first byte back.",
                self.decode_first_byte_seconds,
                self.decode_first_byte_count,
            ),
        ):
            lines += [f"# HELP {PREFIX}{name} {help_text}", f"# TYPE {PREFIX}{name} summary"]
            lines += [f"{PREFIX}{name}_sum {total}", f"{PREFIX}{name}_count {count}"]
        return "\n".join(lines) + "\n"


@dataclass
class Router:
    protocol: str
    prefill: list[str]
    decode: list[str]
    bootstrap_ports: list[int] = field(default_factory=list)
    counters: Counters = field(default_factory=Counters)

    def __post_init__(self) -> None:
        self._next_prefill = itertools.cycle(range(len(self.prefill)))
        self._next_decode = itertools.cycle(range(len(self.decode)))
        self.session: ClientSession | None = None

    # ------------------------------------------------------------------ requests

    async def completion(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.counters.requests += 1
        p, d = next(self._next_prefill), next(self._next_decode)
        path = request.path
        if self.protocol == "sglang":
            return await self._sglang(request, path, body, p, d)
        prefill_body = _one_token(body)
        if self.protocol in KV_PARAMS_PROTOCOLS:
            prefill_body["kv_transfer_params"] = {
                "do_remote_decode": True,
                "do_remote_prefill": False,
                "remote_engine_id": None,
                "remote_block_ids": None,
                "remote_host": None,
                "remote_port": None,
            }
        started = time.monotonic()
        async with self.session.post(self.prefill[p] + path, json=prefill_body) as answer:
            text = await answer.text()
            if answer.status != 200:
                self.counters.prefill_failures += 1
                return web.Response(
                    status=answer.status, text=text, content_type="application/json"
                )
        self.counters.prefill_seconds += time.monotonic() - started
        self.counters.prefill_count += 1
        decode_body = dict(body)
        if self.protocol in KV_PARAMS_PROTOCOLS:
            params = json.loads(text).get("kv_transfer_params")
            if params:
                decode_body["kv_transfer_params"] = params
        return await self._relay(request, self.decode[d] + path, decode_body)

    async def _sglang(self, request, path, body, p, d) -> web.StreamResponse:
        host = urlparse(self.prefill[p]).hostname
        tagged = {
            **body,
            "bootstrap_host": host,
            "bootstrap_port": self.bootstrap_ports[p],
            "bootstrap_room": random.getrandbits(63),
        }
        started = time.monotonic()
        prefill = asyncio.create_task(self._prefill_only(self.prefill[p] + path, tagged, started))
        try:
            return await self._relay(request, self.decode[d] + path, tagged)
        finally:
            await prefill

    async def _prefill_only(self, url: str, body: dict, started: float) -> None:
        try:
            async with self.session.post(url, json=body) as answer:
                await answer.read()
                if answer.status != 200:
                    self.counters.prefill_failures += 1
                    return
        except OSError:
            self.counters.prefill_failures += 1
            return
        self.counters.prefill_seconds += time.monotonic() - started
        self.counters.prefill_count += 1

    async def _relay(self, request: web.Request, url: str, body: dict) -> web.StreamResponse:
        started = time.monotonic()
        async with self.session.post(url, json=body) as answer:
            if answer.status != 200:
                self.counters.decode_failures += 1
                text = await answer.text()
                return web.Response(
                    status=answer.status, text=text, content_type="application/json"
                )
            out = web.StreamResponse(status=200, headers={"Content-Type": answer.content_type})
            await out.prepare(request)
            first = True
            async for chunk in answer.content.iter_any():
                if first:
                    self.counters.decode_first_byte_seconds += time.monotonic() - started
                    self.counters.decode_first_byte_count += 1
                    first = False
                await out.write(chunk)
            await out.write_eof()
            return out

    # ------------------------------------------------------------------ service

    async def models(self, request: web.Request) -> web.Response:
        async with self.session.get(self.decode[0] + "/v1/models") as answer:
            return web.Response(
                status=answer.status, body=await answer.read(), content_type="application/json"
            )

    async def health(self, request: web.Request) -> web.Response:
        down = []
        for url in (*self.prefill, *self.decode):
            try:
                async with self.session.get(
                    url + "/health", timeout=ClientTimeout(total=5)
                ) as answer:
                    if answer.status != 200:
                        down.append(url)
            except (TimeoutError, OSError):
                down.append(url)
        if down:
            return web.Response(status=503, text=f"not ready: {', '.join(down)}\n")
        return web.Response(text="ok\n")

    async def metrics(self, request: web.Request) -> web.Response:
        parts = [self.counters.exposition()]
        pools = [("prefill", n, url) for n, url in enumerate(self.prefill)]
        pools += [("decode", n, url) for n, url in enumerate(self.decode)]
        for pool, index, url in pools:
            try:
                headers = {"Accept-Encoding": "identity"}
                async with self.session.get(url + "/metrics", headers=headers) as answer:
                    text = await answer.text()
            except OSError:
                continue
            parts.append(relabel(text, {"pocforge_pool": pool, "pocforge_instance": str(index)}))
        return web.Response(text="".join(parts), content_type="text/plain")


def _one_token(body: dict) -> dict:
    """The request cut to its prefill: one output token, no streaming."""
    cut = {key: value for key, value in body.items() if key not in ("stream", "stream_options")}
    cut["max_tokens"] = 1
    if "max_completion_tokens" in cut:
        cut["max_completion_tokens"] = 1
    return cut


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?(\s.*)$")


def relabel(text: str, labels: dict[str, str]) -> str:
    """Prometheus text with ``labels`` added to every sample (comments dropped: the
    families of several instances would otherwise repeat their HELP and TYPE lines)."""
    extra = ",".join(f'{key}="{value}"' for key, value in labels.items())
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m is None:
            continue
        name, existing, rest = m.groups()
        inner = existing[1:-1] if existing else ""
        joined = f"{inner},{extra}" if inner else extra
        out.append(f"{name}{{{joined}}}{rest}")
    return "\n".join(out) + "\n" if out else ""


def make_app(router: Router) -> web.Application:
    app = web.Application()

    async def session_ctx(app: web.Application):
        router.session = ClientSession(timeout=ClientTimeout(total=None, sock_connect=30))
        yield
        await router.session.close()

    app.cleanup_ctx.append(session_ctx)
    app.router.add_post("/v1/completions", router.completion)
    app.router.add_post("/v1/chat/completions", router.completion)
    app.router.add_get("/v1/models", router.models)
    app.router.add_get("/health", router.health)
    app.router.add_get("/metrics", router.metrics)
    return app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="pd_router", description=__doc__.split("\n", 1)[0])
    parser.add_argument("--protocol", choices=PROTOCOLS, required=True)
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument(
        "--prefill", action="append", required=True, help="a prefill instance's URL"
    )
    parser.add_argument("--decode", action="append", required=True, help="a decode instance's URL")
    parser.add_argument(
        "--bootstrap-port",
        action="append",
        type=int,
        default=[],
        help="SGLang: each prefill instance's bootstrap port, in --prefill order",
    )
    args = parser.parse_args(argv)
    if args.protocol == "sglang" and len(args.bootstrap_port) != len(args.prefill):
        parser.error("sglang needs one --bootstrap-port per --prefill")
    router = Router(args.protocol, args.prefill, args.decode, args.bootstrap_port)
    web.run_app(make_app(router), host=args.host, port=args.port, print=None)


if __name__ == "__main__":
    main()
