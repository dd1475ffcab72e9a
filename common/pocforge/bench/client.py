"""The streaming HTTP client: one OpenAI-compatible request, timed, and its stream parsed.

Why it reads less into the numbers than other clients: the hot path of a stream does only
``perf_counter()`` and a list append per network read. Parsing the SSE events and the JSON
happens once the stream has ended, so one stream's parsing never delays another stream's
timestamps; request bodies are serialised before the send time. Each SSE event is stamped
with the time of the read that completed it (the earliest moment any client could see it).

Two transports carry the requests, selectable per sweep (``transport``): ``raw``
(:mod:`pocforge.bench.rawhttp`, the default for ``http://``: the event loop hands each read
straight to a protocol callback, no task wake-up per read) and ``aiohttp`` (this module's
:func:`send_streaming`: aiohttp's client, also used for ``https://``). Both return the same
:class:`RawResult`; their results agree (``tests/bench/test_bench_rawhttp.py``).

Definitions (those of :mod:`pocforge.metrics`, vLLM's except where noted):

- TTFT: ``perf_counter()`` just before the request is handed to the transport, to the first event
  whose choice carries non-empty ``text`` (completions) or ``delta.content`` /
  ``delta.reasoning_content`` (chat). vLLM's client stops the clock on the first event with
  any choice, which for chat is the role-only event.
- ITL: gaps between consecutive token-carrying events.
- E2EL: to the last byte of the response (vLLM: to the last event with a choice).
- output tokens: the server's ``usage.completion_tokens`` when streamed, else the
  tokenizer's count of the text, else the number of token-carrying events.
"""

from __future__ import annotations

import itertools
import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import aiohttp

if TYPE_CHECKING:
    from pocforge.bench.rawhttp import RawTransport

Api = Literal["completions", "chat"]
ENDPOINTS: dict[str, str] = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}


@dataclass(slots=True)
class ParsedStream:
    """What a finished stream said, with event times in seconds (perf_counter clock)."""

    token_times: list[float] = field(default_factory=list)
    text: str = ""
    empty_chunks: int = 0
    usage: dict[str, Any] | None = None
    error: str | None = None


_scan_json = json.JSONDecoder().scan_once  # the C scanner json.loads ends in, minus its wrappers


def parse_stream(reads: list[tuple[float, bytes]], api: Api) -> ParsedStream:
    """Parse SSE ``reads`` (``(time, bytes)`` per network read) into token times and usage.

    An event belongs to the read in which its terminating blank line arrived. Comments
    (``:``-lines), ``[DONE]`` and events without choices (the usage-only final event) carry
    no token; an ``{"error": ...}`` event marks the stream failed. Runs once per finished
    stream, off the hot path; it is still kept lean (one JSON scan per event, no per-event
    function calls) because its cost is counted in the client's CPU per chunk.
    """
    if not reads:
        return ParsedStream()
    body = b"".join([data for _, data in reads])
    if b"\r" in body:
        times, payloads = _events_crlf(reads)
    else:  # one split of the whole body; each event's end is mapped back to its read
        times, payloads = [], []
        ends = list(itertools.accumulate([len(data) for _, data in reads]))
        *events, rest = body.split(b"\n\n")
        pos = ri = 0
        for raw in events:
            pos += len(raw) + 2
            while ends[ri] < pos:
                ri += 1
            if raw[:5] == b"data:" and b"\n" not in raw:  # the one-line event servers send
                payload = raw[5:].lstrip()
            else:
                payload = _payload(raw)
            if payload and payload != b"[DONE]":
                times.append(reads[ri][0])
                payloads.append(payload)
        if rest.strip():  # a last event without its blank line (some servers) still counts
            payload = _payload(rest)
            if payload and payload != b"[DONE]":
                times.append(reads[-1][0])
                payloads.append(payload)
    return _interpret(times, payloads, api)


def _events_crlf(reads: list[tuple[float, bytes]]) -> tuple[list[float], list[bytes]]:
    """Events of a stream with CRLF line ends, normalised read by read."""
    times: list[float] = []
    payloads: list[bytes] = []
    buf = b""
    for t, data in reads:
        buf += data
        if b"\n\n" not in buf and b"\r\n\r\n" not in buf:
            continue
        if b"\r\n" in buf:
            buf = buf.replace(b"\r\n", b"\n")
        *events, buf = buf.split(b"\n\n")
        for raw in events:
            payload = _payload(raw)
            if payload and payload != b"[DONE]":
                times.append(t)
                payloads.append(payload)
    if buf.strip():
        payload = _payload(buf.replace(b"\r\n", b"\n"))
        if payload and payload != b"[DONE]":
            times.append(reads[-1][0])
            payloads.append(payload)
    return times, payloads


def _payload(raw: bytes) -> bytes:
    """The event's data: its ``data:`` lines joined, leading spaces dropped."""
    return b"".join(line[5:].lstrip() for line in raw.split(b"\n") if line.startswith(b"data:"))


def _interpret(times: list[float], payloads: list[bytes], api: Api) -> ParsedStream:
    out = ParsedStream()
    parts: list[str] = []
    chat = api == "chat"
    for t, payload in zip(times, payloads, strict=True):
        try:
            text = payload.decode()
            data, end = _scan_json(text, 0)
            if end != len(text) and text[end:].strip():
                raise ValueError("extra data")
        except (ValueError, StopIteration):
            out.error = out.error or f"unparseable event: {payload[:80]!r}"
            continue
        if type(data) is not dict:
            continue
        choices = data.get("choices")
        if not choices:
            if "error" in data:
                err = data["error"]
                out.error = out.error or (err.get("message") if isinstance(err, dict) else str(err))
                continue
            if data.get("usage"):
                out.usage = data["usage"]
            continue
        if data.get("usage"):
            out.usage = data["usage"]
        choice = choices[0]
        if chat:
            delta = choice.get("delta") or {}
            piece = delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning")
        else:
            piece = choice.get("text")
        if piece:
            out.token_times.append(t)
            parts.append(piece)
        else:
            out.empty_chunks += 1
    out.text = "".join(parts)
    return out


def build_payload(
    api: Api,
    model: str,
    prompt: str,
    max_tokens: int,
    ignore_eos: bool,
    extra: dict[str, Any] | None = None,
) -> bytes:
    """The JSON body, serialised ahead of the send time."""
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.0,
    }
    if api == "completions":
        body["prompt"] = prompt
    else:
        body["messages"] = [{"role": "user", "content": prompt}]
    if ignore_eos:
        body["ignore_eos"] = True
    if extra:
        body.update(extra)
    return json.dumps(body).encode()


@dataclass(slots=True)
class RawResult:
    """A finished request before metric computation. Times in perf_counter seconds.

    ``reads`` are the body's network reads; with ``framing="chunked"`` they still carry the
    HTTP/1.1 chunk framing (the raw transport decodes it when the record is built).
    """

    start: float
    end: float
    status: int | None
    reads: list[tuple[float, bytes]]
    error: str | None = None
    framing: Literal["identity", "chunked"] = "identity"


_HEADERS = {"Content-Type": "application/json", "Accept": "text/event-stream"}


async def send_streaming(
    session: aiohttp.ClientSession, url: str, body: bytes, headers: dict[str, str] | None = None
) -> RawResult:
    """POST ``body`` and collect ``(time, bytes)`` of every read until the stream ends."""
    reads: list[tuple[float, bytes]] = []
    append = reads.append
    clock = time.perf_counter
    start = clock()
    try:
        async with session.post(url, data=body, headers=headers or _HEADERS) as resp:
            if resp.status != 200:
                text = (await resp.text())[:300]
                return RawResult(start, clock(), resp.status, reads, f"HTTP {resp.status}: {text}")
            content = resp.content
            while True:
                data = await content.readany()
                if not data:
                    break
                append((clock(), data))
            return RawResult(start, clock(), resp.status, reads)
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        return RawResult(start, clock(), None, reads, f"{type(exc).__name__}: {exc}".strip())


class AiohttpTransport:
    """aiohttp's client as a streaming transport (the session is the caller's)."""

    kind = "aiohttp"

    def __init__(self, session: aiohttp.ClientSession):
        self.session = session

    async def stream(self, url: str, body: bytes) -> RawResult:
        return await send_streaming(self.session, url, body)

    async def aclose(self) -> None:
        """The session belongs to the caller, who closes it."""


Transport = Literal["auto", "raw", "aiohttp"]


def resolve_transport(kind: Transport, base_url: str) -> Literal["raw", "aiohttp"]:
    """``auto``: the raw transport for ``http://`` servers, aiohttp for ``https://``."""
    if kind == "auto":
        return "raw" if base_url.lower().startswith("http://") else "aiohttp"
    return kind


def open_transport(
    kind: Literal["raw", "aiohttp"], session: aiohttp.ClientSession, timeout_s: float = 600.0
) -> AiohttpTransport | RawTransport:
    """The streaming transport ``kind``; ``session`` serves the aiohttp one."""
    if kind == "aiohttp":
        return AiohttpTransport(session)
    from pocforge.bench.rawhttp import RawTransport

    return RawTransport(timeout_s=timeout_s)


def make_session(limit: int = 0, timeout_s: float = 600.0) -> aiohttp.ClientSession:
    """A session tuned for measurement: no cookie jar, no proxy lookup, TCP_NODELAY."""
    connector = aiohttp.TCPConnector(
        limit=limit, limit_per_host=limit, ttl_dns_cache=300, keepalive_timeout=60
    )
    return aiohttp.ClientSession(
        connector=connector,
        cookie_jar=aiohttp.DummyCookieJar(),
        timeout=aiohttp.ClientTimeout(total=timeout_s, sock_connect=10),
        trust_env=False,
        auto_decompress=False,
        skip_auto_headers=("User-Agent",),
    )
