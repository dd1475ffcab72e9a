"""The streaming HTTP client: one OpenAI-compatible request, timed, and its stream parsed.

Why it reads less into the numbers than other clients: the hot path of a stream does only
``perf_counter()`` and a list append per network read. Parsing the SSE events and the JSON
happens once the stream has ended, so one stream's parsing never delays another stream's
timestamps; request bodies are serialised before the send time. Each SSE event is stamped
with the time of the read that completed it (the earliest moment any client could see it).

Definitions (those of :mod:`pocforge.metrics`, vLLM's except where noted):

- TTFT: ``perf_counter()`` just before the request is handed to aiohttp, to the first event
  whose choice carries non-empty ``text`` (completions) or ``delta.content`` /
  ``delta.reasoning_content`` (chat). vLLM's client stops the clock on the first event with
  any choice, which for chat is the role-only event.
- ITL: gaps between consecutive token-carrying events.
- E2EL: to the last byte of the response (vLLM: to the last event with a choice).
- output tokens: the server's ``usage.completion_tokens`` when streamed, else the
  tokenizer's count of the text, else the number of token-carrying events.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import aiohttp

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


def _event_text(api: Api, choice: dict) -> str:
    if api == "completions":
        return choice.get("text") or ""
    delta = choice.get("delta") or {}
    return delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning") or ""


def parse_stream(reads: list[tuple[float, bytes]], api: Api) -> ParsedStream:
    """Parse SSE ``reads`` (``(time, bytes)`` per network read) into token times and usage.

    An event belongs to the read in which its terminating blank line arrived. Comments
    (``:``-lines), ``[DONE]`` and events without choices (the usage-only final event) carry
    no token; an ``{"error": ...}`` event marks the stream failed.
    """
    out = ParsedStream()
    buf = b""
    parts: list[str] = []
    for t, data in reads:
        buf += data
        if b"\n\n" not in buf and b"\r\n\r\n" not in buf:
            continue
        if b"\r\n" in buf:
            buf = buf.replace(b"\r\n", b"\n")
        *events, buf = buf.split(b"\n\n")
        for raw in events:
            _parse_event(raw, t, api, out, parts)
    if buf.strip():  # a last event without its blank line (some servers) still counts
        _parse_event(buf, reads[-1][0], api, out, parts)
    out.text = "".join(parts)
    return out


def _parse_event(raw: bytes, t: float, api: Api, out: ParsedStream, parts: list[str]) -> None:
    payload = b"".join(line[5:].lstrip() for line in raw.split(b"\n") if line.startswith(b"data:"))
    if not payload or payload == b"[DONE]":
        return
    try:
        data = json.loads(payload)
    except ValueError:
        out.error = out.error or f"unparseable event: {payload[:80]!r}"
        return
    if not isinstance(data, dict):
        return
    if "error" in data and not data.get("choices"):
        err = data["error"]
        out.error = out.error or (err.get("message") if isinstance(err, dict) else str(err))
        return
    if data.get("usage"):
        out.usage = data["usage"]
    choices = data.get("choices")
    if not choices:
        return
    text = _event_text(api, choices[0])
    if text:
        out.token_times.append(t)
        parts.append(text)
    else:
        out.empty_chunks += 1


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
    """A finished request before metric computation. Times in perf_counter seconds."""

    start: float
    end: float
    status: int | None
    reads: list[tuple[float, bytes]]
    error: str | None = None


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
