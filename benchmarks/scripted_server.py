"""A scripted streaming server: a measurement instrument with a known TTFT and ITL.

It answers ``/v1/completions`` and ``/v1/chat/completions`` with SSE streams shaped like
vLLM's (HTTP/1.1, chunked): the first token ``ttft_ms`` after the request arrived, then one
token every ``itl_ms`` (on an absolute schedule, so lateness never accumulates),
``max_tokens`` tokens, a usage-only final event when ``stream_options.include_usage`` is
set, then ``[DONE]``.

It also reports its own error: for every chunk, how late it was written against the
schedule and the gaps it actually wrote (``GET /lag``: first-chunk and later-chunk
lateness, gaps; reset with ``POST /lag/reset``). The truth a client should measure is the
scripted value plus the server's lateness, so the client's own error can be told apart
from the server's. It is not a stand-in for vLLM: no tokenizer, no batching; ``/metrics``
exposes two counters only.

For the fault suite it can also misbehave on purpose: every ``fault_every``-th streaming
request gets the next of ``faults`` in turn (``500``: an HTTP 500 with an error body;
``malformed``: a stream with an event that is not JSON; ``stall``: one token, then
nothing; ``reset``: one token, then a TCP reset), and ``GET /lag`` says when each good
stream finished (``completed_at``, ``time.monotonic()``: the system-wide monotonic clock,
comparable with a client's in another process) and how many of each fault it served.

Why a bare ``asyncio.Protocol`` server and not a web framework: the schedule's clock starts
at the read that completed the request, stamped before any parsing. A framework starts its
handler only after parsing, routing and task creation, and when 64-256 closed-loop requests
land in the same millisecond the last handler starts milliseconds after its request came;
that intake queue would be counted as client error. Here it is the server's lateness, where
it belongs. Each chunk is a timer callback, not a sleeping task, so the server itself costs
little CPU next to the clients it measures.

Run: ``python -m benchmarks.scripted_server --port 8100 --ttft-ms 100 --itl-ms 20``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

_TOKEN = " tok"
_MAX_REQUEST = 1 << 20


class Instrument:
    """The scripted schedule and the lateness record, shared by every connection."""

    def __init__(
        self,
        ttft_ms: float,
        itl_ms: float,
        fail_after: int | None = None,
        faults: tuple[str, ...] = (),
        fault_every: int = 0,
    ):
        self.ttft_s = ttft_ms / 1000.0
        self.itl_s = itl_ms / 1000.0
        self.fail_after = fail_after
        unknown = set(faults) - set(FAULTS)
        if unknown or (faults and fault_every < 1):
            raise ValueError(f"faults: {sorted(unknown)} not in {FAULTS}, or fault_every < 1")
        self.faults, self.fault_every = faults, fault_every
        self.faulted = dict.fromkeys(faults, 0)
        self.completed_at: list[float] = []
        self.first_lag_ms: list[float] = []
        self.next_lag_ms: list[float] = []
        self.gaps_ms: list[float] = []
        self.requests = 0
        self.chunks = 0
        self.events = {
            api: _chunk(f"data: {_event_json(api)}\n\n".encode()) for api in API_OF.values()
        }

    def answer(self, conn: _Conn, arrived: float, method: str, path: str, body: bytes) -> None:
        """Answer one complete request; ``arrived`` is when its last byte was read."""
        path = path.split("?", 1)[0]
        if method == "GET" and path == "/v1/models":
            conn.send_json({"object": "list", "data": [{"id": "instrument", "object": "model"}]})
        elif method == "GET" and path == "/metrics":
            text = (
                "# TYPE vllm:request_success_total counter\n"
                f"vllm:request_success_total {self.requests}\n"
                "# TYPE vllm:generation_tokens_total counter\n"
                f"vllm:generation_tokens_total {self.chunks}\n"
            )
            conn.send(200, "text/plain; version=0.0.4", text.encode())
        elif method == "GET" and path == "/lag":
            conn.send_json(
                {
                    "first_ms": self.first_lag_ms,
                    "next_ms": self.next_lag_ms,
                    "gaps_ms": self.gaps_ms,
                    "requests": self.requests,
                    "chunks": self.chunks,
                    "clock": "request arrival",
                    "completed_at": self.completed_at,
                    "faulted": self.faulted,
                }
            )
        elif method == "POST" and path == "/lag/reset":
            self.first_lag_ms, self.next_lag_ms, self.gaps_ms = [], [], []
            self.completed_at = []
            self.faulted = dict.fromkeys(self.faults, 0)
            conn.send_json({"ok": True})
        elif method == "POST" and path in API_OF:
            self.stream(conn, arrived, API_OF[path], body)
        else:
            conn.send(404, "text/plain", b"not found")

    def stream(self, conn: _Conn, arrived: float, api: str, body: bytes) -> None:
        try:
            req = json.loads(body)
            n = int(req.get("max_tokens") or 16)
        except (ValueError, TypeError, AttributeError):
            conn.send(400, "text/plain", b"bad request body")
            return
        if self.fail_after is not None and self.requests >= self.fail_after:
            conn.send(503, "text/plain", b"instrument: failing as configured")
            return
        self.requests += 1
        fault = self._fault()
        if fault == "500":
            body = {"error": {"message": "instrument: internal error as configured", "code": 500}}
            conn.send(500, "application/json", json.dumps(body).encode())
            return
        usage = bool((req.get("stream_options") or {}).get("include_usage"))
        tail = b""
        if usage:
            u = {"prompt_tokens": 1, "completion_tokens": n, "total_tokens": n + 1}
            tail = f"data: {json.dumps({'id': 'x', 'choices': [], 'usage': u})}\n\n".encode()
        tail = _chunk(tail + b"data: [DONE]\n\n") + b"0\r\n\r\n"
        conn.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        _Stream(self, conn, arrived, n, self.events[api], tail, fault).arm()

    def _fault(self) -> str | None:
        """The fault this request (``self.requests``, counted from 1) gets, if any."""
        if not self.faults or self.requests % self.fault_every:
            return None
        kind = self.faults[(self.requests // self.fault_every - 1) % len(self.faults)]
        self.faulted[kind] += 1
        return kind


class _Stream:
    """One scripted response: a timer per chunk, each due on the absolute schedule."""

    __slots__ = ("inst", "conn", "t0", "n", "event", "tail", "fault", "i", "prev", "due", "loop")

    def __init__(
        self,
        inst: Instrument,
        conn: _Conn,
        t0: float,
        n: int,
        event: bytes,
        tail: bytes,
        fault: str | None = None,
    ):
        self.inst, self.conn, self.t0, self.n = inst, conn, t0, n
        self.event, self.tail, self.fault = event, tail, fault
        self.i, self.prev, self.due = 0, 0.0, 0.0
        self.loop = asyncio.get_running_loop()

    def arm(self) -> None:
        self.due = self.t0 + self.inst.ttft_s + self.i * self.inst.itl_s
        self.loop.call_later(max(0.0, self.due - time.perf_counter()), self.fire)

    def fire(self) -> None:
        if self.conn.closed:
            return
        now = time.perf_counter()
        if now < self.due - 0.0005:  # the loop's timers are millisecond-rounded: not early
            self.loop.call_later(self.due - now, self.fire)
            return
        self.conn.write(self.event)
        inst = self.inst
        if self.i:
            inst.next_lag_ms.append((now - self.due) * 1000.0)
            inst.gaps_ms.append((now - self.prev) * 1000.0)
        else:
            inst.first_lag_ms.append((now - self.due) * 1000.0)
        inst.chunks += 1
        self.prev = now
        self.i += 1
        if self.fault is not None:
            self.misbehave()
        elif self.i < self.n:
            self.arm()
        else:
            self.conn.write(self.tail)
            inst.completed_at.append(time.monotonic())
            self.conn.done()

    def misbehave(self) -> None:
        """After one good token: the configured fault instead of the rest of the stream."""
        if self.fault == "malformed":
            self.conn.write(_chunk(b'data: {"choices": [{"delta": {"content"\n\n') + self.tail)
            self.conn.done()
        elif self.fault == "reset":
            self.conn.reset()
        # "stall": nothing more is ever written; the client's timeout has to end it


class _Conn(asyncio.Protocol):
    """HTTP/1.1 server side of one connection: keep-alive, requests with Content-Length.

    A request's arrival is the time of the read that completed it, taken before anything
    else is done with it; the answer runs in a later loop callback, so requests that arrive
    together are all stamped before any of them is served.
    """

    def __init__(self, inst: Instrument):
        self.inst = inst
        self.buf = b""
        self.busy = False
        self.closed = False
        self.transport: asyncio.Transport | None = None
        self.keep_alive = True

    def connection_made(self, transport) -> None:  # noqa: ANN001 - asyncio's signature
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        self.buf += data
        if not self.busy:
            self._next(now)

    def _next(self, arrived: float) -> None:
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self.buf) > _MAX_REQUEST:
                self._bad()
            return
        lines = self.buf[:end].decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        headers = {}
        for h in lines[1:]:
            k, _, v = h.partition(":")
            headers[k.strip().lower()] = v.strip()
        if len(parts) != 3 or "chunked" in headers.get("transfer-encoding", "").lower():
            self._bad()
            return
        try:
            length = int(headers.get("content-length", "0"))
        except ValueError:
            self._bad()
            return
        if len(self.buf) < end + 4 + length:
            return
        body = self.buf[end + 4 : end + 4 + length]
        self.buf = self.buf[end + 4 + length :]
        self.keep_alive = (
            headers.get("connection", "").lower() != "close" and parts[2] == "HTTP/1.1"
        )
        self.busy = True
        asyncio.get_running_loop().call_soon(
            self.inst.answer, self, arrived, parts[0], parts[1], body
        )

    def _bad(self) -> None:
        self.keep_alive = False
        self.busy = True
        self.send(400, "text/plain", b"bad request")

    def write(self, data: bytes) -> None:
        if not self.closed:
            self.transport.write(data)

    def reset(self) -> None:
        """Drop the connection with a TCP RST (linger 0), as a crashed proxy would."""
        if self.closed:
            return
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.transport.abort()
        self.closed = True

    def send(self, status: int, ctype: str, body: bytes) -> None:
        reason = {
            200: "OK",
            400: "Bad Request",
            404: "Not Found",
            500: "Internal Server Error",
            503: "Service Unavailable",
        }
        self.write(
            f"HTTP/1.1 {status} {reason.get(status, 'Status')}\r\nContent-Type: {ctype}"
            f"\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        self.done()

    def send_json(self, obj: object) -> None:
        self.send(200, "application/json", json.dumps(obj).encode())

    def done(self) -> None:
        """The response is written: close, or take the next request already buffered."""
        if not self.keep_alive:
            if not self.closed:
                self.transport.close()
            return
        self.busy = False
        if self.buf:
            self._next(time.perf_counter())


API_OF = {"/v1/completions": "completions", "/v1/chat/completions": "chat"}
FAULTS = ("500", "malformed", "stall", "reset")


def _event_json(api: str) -> str:
    if api == "chat":
        choice = {"index": 0, "delta": {"content": _TOKEN}, "finish_reason": None}
        return json.dumps(
            {
                "id": "x",
                "object": "chat.completion.chunk",
                "model": "instrument",
                "choices": [choice],
            },
            separators=(",", ":"),
        )
    choice = {"index": 0, "text": _TOKEN, "finish_reason": None}
    return json.dumps(
        {"id": "x", "object": "text_completion", "model": "instrument", "choices": [choice]},
        separators=(",", ":"),
    )


def _chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


async def serve(host: str, port: int, inst: Instrument) -> None:
    """Serve ``inst`` until cancelled."""
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Conn(inst), host, port, backlog=4096)
    async with server:
        await server.serve_forever()


@contextlib.contextmanager
def running_instrument(
    ttft_ms: float,
    itl_ms: float,
    fail_after: int | None = None,
    port: int | None = None,
    faults: tuple[str, ...] = (),
    fault_every: int = 0,
) -> Iterator[str]:
    """Start the instrument in its own process (own core time, own event loop); yield its URL.

    Stopped by pid (its own process group) on exit, also when the body raises.
    """
    from pocforge.frameworks.process import free_port  # here: the server process needs none of it

    port = port or free_port()
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.scripted_server",
        "--port",
        str(port),
        "--ttft-ms",
        str(ttft_ms),
        "--itl-ms",
        str(itl_ms),
    ]
    if fail_after is not None:
        cmd += ["--fail-after", str(fail_after)]
    if faults:
        cmd += ["--faults", ",".join(faults), "--fault-every", str(fault_every)]
    proc = subprocess.Popen(
        cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
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
    ap.add_argument("--faults", default="", help=f"comma-separated, of {', '.join(FAULTS)}")
    ap.add_argument("--fault-every", type=int, default=0, help="every Nth request gets a fault")
    args = ap.parse_args(argv)
    faults = tuple(f for f in args.faults.split(",") if f)
    try:
        inst = Instrument(args.ttft_ms, args.itl_ms, args.fail_after, faults, args.fault_every)
    except ValueError as exc:
        ap.error(str(exc))
    try:
        import uvloop

        runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    except ImportError:
        runner = asyncio.Runner()
    with contextlib.suppress(KeyboardInterrupt), runner:
        runner.run(serve(args.host, args.port, inst))


if __name__ == "__main__":
    main()
