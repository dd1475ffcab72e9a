"""A minimal HTTP/1.1 streaming client on an ``asyncio.Protocol``: the lean measurement path.

Why it exists: on aiohttp's path every network read of a stream costs an HTTP-parser
callback, a ``StreamReader`` feed, a future resolution and a task wake-up before the client
can even take the time. Here the event loop calls :meth:`_Conn.data_received` directly and
the hot path is one ``perf_counter()``, two list appends and a length comparison; the task
that sent the request wakes once, when the response has ended. Everything else (header
parsing happens once per response, chunked-transfer decoding and SSE parsing) is deferred:
:func:`dechunk` runs when the record is built, after the stream ended.

Scope (a benchmark client, not a general one): ``http://`` only, POST with a
``Content-Length`` body, no redirects, no proxies, no compression asked for. Responses may
use ``Content-Length``, ``Transfer-Encoding: chunked`` or read-until-close. Connections are
kept alive and reused (``Connection: close`` and HTTP/1.0 answers are honoured). The number
of connections is bounded by the requests in flight, which the load generator bounds.
"""

from __future__ import annotations

import asyncio
import time
import urllib.parse
from dataclasses import dataclass

from pocforge.bench.client import RawResult

_HEAD, _CHUNK_SIZE, _CHUNK_DATA, _TRAILER, _LENGTH, _UNTIL_CLOSE, _DONE = range(7)
_MAX_HEAD = 64 * 1024


class ProtocolError(Exception):
    """The server's answer is not valid HTTP/1.1 (bad status line, chunk size, length)."""


class ServerDisconnectedError(ConnectionError):
    """The server closed the connection before the response ended."""


def dechunk(reads: list[tuple[float, bytes]]) -> list[tuple[float, bytes]]:
    """Decode a chunked body read by read: ``(time, payload bytes that arrived in it)``.

    Chunk framing split anywhere across reads is handled; a read that carried framing only
    is dropped. Raises :class:`ProtocolError` on a malformed size line or a missing CRLF
    after chunk data, so a broken stream fails its record instead of being misread.
    """
    out: list[tuple[float, bytes]] = []
    state, need, line = _CHUNK_SIZE, 0, b""
    for t, data in reads:
        n = len(data)
        if state == _CHUNK_SIZE and not line:  # fast path: the read is one whole chunk
            j = data.find(b"\r\n", 0, 18)
            if j > 0:
                try:
                    size = int(data[:j], 16)
                except ValueError:  # an extension or junk: the general path decides
                    size = 0
                if size > 0 and j + size + 4 == n and data[n - 2 :] == b"\r\n":
                    out.append((t, data[j + 2 : n - 2]))
                    continue
        pos, parts = 0, []
        while pos < n and state != _DONE:
            if state == _CHUNK_DATA:
                take = min(need - 2, n - pos) if need > 2 else 0
                if take:
                    parts.append(data[pos : pos + take])
                    pos += take
                    need -= take
                while need and pos < n:  # the CRLF that closes the chunk's data
                    want = b"\r\n"[2 - need]
                    if data[pos] != want:
                        raise ProtocolError("chunk data not followed by CRLF")
                    pos += 1
                    need -= 1
                if not need:
                    state = _CHUNK_SIZE
                continue
            j = data.find(b"\n", pos)
            if j < 0:
                line += data[pos:]
                break
            line, text = b"", line + data[pos:j]
            pos = j + 1
            if state == _TRAILER:
                if not text.strip():
                    state = _DONE
                continue
            size = _chunk_size(text)
            state, need = (_TRAILER, 0) if size == 0 else (_CHUNK_DATA, size + 2)
        if parts:
            out.append((t, parts[0] if len(parts) == 1 else b"".join(parts)))
    if state != _DONE:
        raise ProtocolError("chunked body ended before its last chunk")
    return out


def _chunk_size(line: bytes) -> int:
    try:
        size = int(line.split(b";", 1)[0].strip(), 16)
    except ValueError:
        size = -1
    if size < 0:
        raise ProtocolError(f"bad chunk size line {line[:40]!r}")
    return size


@dataclass(frozen=True, slots=True)
class _Target:
    key: tuple[str, int]
    host: str
    port: int
    head: bytes  # request line and headers up to "Content-Length: "


class _Conn(asyncio.Protocol):
    """One keep-alive connection; records ``(perf_counter(), bytes)`` of each read.

    Response framing is tracked just enough to know where the response ends: inside chunk
    data or a ``Content-Length`` body a read costs a subtraction; only reads that reach a
    chunk-size line walk it.
    """

    def __init__(self, pool: RawTransport, key: tuple[str, int]):
        self.pool, self.key = pool, key
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle = False
        self.waiter: asyncio.Future | None = None
        self._reset()

    def _reset(self) -> None:
        self.times: list[float] = []
        self.datas: list[bytes] = []
        self.state = _HEAD
        self.need = 0
        self.line = b""
        self.status: int | None = None
        self.chunked = False
        self.keep_alive = True
        self.end = 0.0

    def begin(self, waiter: asyncio.Future) -> None:
        self._reset()
        self.waiter = waiter
        self.idle = False

    # -- asyncio.Protocol ---------------------------------------------------------------
    def connection_made(self, transport) -> None:  # noqa: ANN001 - asyncio's signature
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.times.append(time.perf_counter())
        self.datas.append(data)
        n = len(data)
        if self.need > n:  # wholly inside chunk data or a sized body: the hot path
            self.need -= n
            return
        if self.state == _CHUNK_SIZE and not self.line and data[n - 2 :] == b"\r\n":
            # The other hot path: the read is exactly one whole chunk (how servers write).
            j = data.find(b"\r\n", 0, 18)
            if j > 0 and j + 4 < n:
                try:
                    if j + int(data[:j], 16) + 4 == n:
                        return
                except ValueError:
                    pass
        try:
            self._scan(data)
        except ProtocolError as exc:
            self._fail(exc)

    def eof_received(self) -> bool:
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.idle:
            self.pool._forget(self)
        elif self.state == _UNTIL_CLOSE:
            self.end = self.times[-1] if self.times else time.perf_counter()
            self.keep_alive = False
            self._complete()
        elif self.state != _DONE:
            self._fail(exc or ServerDisconnectedError("server closed the connection mid-response"))

    # -- framing ------------------------------------------------------------------------
    def _scan(self, data: bytes) -> None:
        pos, n = 0, len(data)
        if self.state == _DONE:  # bytes nobody asked for: this connection is out of step
            self.keep_alive = False
            if self.transport is not None:
                self.transport.close()
            return
        if self.state == _HEAD:
            pos = self._head(data)
            if pos < 0:
                return
        while self.state != _DONE:
            state = self.state
            if state == _UNTIL_CLOSE:
                return
            if state in (_CHUNK_DATA, _LENGTH):
                take = min(self.need, n - pos)
                self.need -= take
                pos += take
                if self.need:
                    return
                if state == _LENGTH:
                    return self._finish(data, pos)
                self.state = _CHUNK_SIZE
                continue
            if pos >= n:
                return
            j = data.find(b"\n", pos)
            if j < 0:
                self.line += data[pos:]
                return
            text, self.line = self.line + data[pos:j], b""
            pos = j + 1
            if state == _TRAILER:
                if not text.strip():
                    return self._finish(data, pos)
                continue
            size = _chunk_size(text)
            if size:
                self.state, self.need = _CHUNK_DATA, size + 2
            else:
                self.state = _TRAILER

    def _head(self, data: bytes) -> int:
        """Parse the status line and headers once they are complete; return the body offset."""
        buf = self.line + data
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if len(buf) > _MAX_HEAD:
                raise ProtocolError("response headers too long")
            self.line = buf
            return -1
        self.line = b""
        lines = buf[:end].decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
            raise ProtocolError(f"bad status line {lines[0][:60]!r}")
        try:
            self.status = int(parts[1])
        except ValueError:
            raise ProtocolError(f"bad status line {lines[0][:60]!r}") from None
        headers = {}
        for h in lines[1:]:
            k, _, v = h.partition(":")
            headers[k.strip().lower()] = v.strip().lower()
        conn = headers.get("connection", "")
        self.keep_alive = "close" not in conn and (parts[0] == "HTTP/1.1" or "keep-alive" in conn)
        # The body starts in this read: keep only the body part, stamped with this read's time.
        t = self.times[-1]
        body = buf[end + 4 :]
        self.times.clear()
        self.datas.clear()
        if body:
            self.times.append(t)
            self.datas.append(body)
        if "chunked" in headers.get("transfer-encoding", ""):
            self.chunked = True
            self.state = _CHUNK_SIZE
        elif "content-length" in headers:
            try:
                self.need = int(headers["content-length"])
            except ValueError:
                raise ProtocolError("bad Content-Length") from None
            self.state = _LENGTH
            if self.need == 0:
                self.end = t
                self.state = _DONE
                self._complete()
                return -1
        else:
            self.state, self.need = _UNTIL_CLOSE, 1 << 62
            self.keep_alive = False
        # Offset of the body within ``data`` (headers may have started in an earlier read).
        return len(data) - len(body)

    def _finish(self, data: bytes, pos: int) -> None:
        self.state = _DONE
        self.end = self.times[-1]
        if pos < len(data):  # bytes after the response: not ours to read, so not reusable
            self.datas[-1] = self.datas[-1][: len(self.datas[-1]) - (len(data) - pos)]
            self.keep_alive = False
        self._complete()

    def _complete(self) -> None:
        w, self.waiter = self.waiter, None
        if w is not None and not w.done():
            w.set_result(None)

    def _fail(self, exc: BaseException) -> None:
        self.keep_alive = False
        w, self.waiter = self.waiter, None
        if w is not None and not w.done():
            w.set_exception(exc)
        if self.transport is not None:
            self.transport.abort()

    def timed_out(self, after_s: float) -> None:
        self._fail(TimeoutError(f"no complete response after {after_s:g} s"))


class RawTransport:
    """Streaming POSTs over pooled keep-alive connections; the same results as aiohttp's path."""

    kind = "raw"

    def __init__(
        self,
        timeout_s: float = 600.0,
        connect_timeout_s: float = 10.0,
        headers: dict[str, str] | None = None,
    ):
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        self._targets: dict[str, _Target] = {}
        self._idle: dict[tuple[str, int], list[_Conn]] = {}
        self._conns: set[_Conn] = set()
        self.connections_opened = 0

    def _target(self, url: str) -> _Target:
        u = urllib.parse.urlsplit(url)
        if u.scheme != "http":
            raise ValueError(f"the raw transport speaks http:// only, not {u.scheme}://")
        host, port = u.hostname or "127.0.0.1", u.port or 80
        path = (u.path or "/") + (f"?{u.query}" if u.query else "")
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {u.netloc}\r\nContent-Type: application/json\r\n"
            f"Accept: text/event-stream\r\n{self.extra}Content-Length: "
        ).encode("latin-1")
        t = _Target((host, port), host, port, head)
        self._targets[url] = t
        return t

    async def _connect(self, t: _Target) -> _Conn:
        loop = asyncio.get_running_loop()
        _, conn = await asyncio.wait_for(
            loop.create_connection(lambda: _Conn(self, t.key), t.host, t.port),
            self.connect_timeout_s,
        )
        self._conns.add(conn)
        self.connections_opened += 1
        return conn

    def _forget(self, conn: _Conn) -> None:
        self._conns.discard(conn)
        idle = self._idle.get(conn.key)
        if idle and conn in idle:
            idle.remove(conn)

    async def stream(self, url: str, body: bytes) -> RawResult:
        """POST ``body`` to ``url`` and collect every read until the response ends.

        A reused connection that the server closed while it was idle (its keep-alive timer
        ran out as this request left) is retried once on a new connection, but only when not
        a byte of an answer came back; the clock keeps its first start.
        """
        t = self._targets.get(url) or self._target(url)
        start = time.perf_counter()
        request = t.head + b"%d\r\n\r\n" % len(body) + body
        conn: _Conn | None = None
        try:
            conn = self._take(t.key)
            if conn is not None:
                try:
                    await self._exchange(conn, request)
                except ConnectionError:
                    if conn.times:
                        raise
                    self._discard(conn)
                    conn = None
            if conn is None:
                conn = await self._connect(t)
                await self._exchange(conn, request)
        except (OSError, TimeoutError, ProtocolError) as exc:
            reads = list(zip(conn.times, conn.datas, strict=True)) if conn is not None else []
            if conn is not None:
                self._discard(conn)
            return RawResult(
                start,
                time.perf_counter(),
                conn.status if conn else None,
                reads,
                f"{type(exc).__name__}: {exc}".strip(),
            )
        except asyncio.CancelledError:
            if conn is not None:
                self._discard(conn)
            raise
        reads = list(zip(conn.times, conn.datas, strict=True))
        status, chunked = conn.status, conn.chunked
        if conn.keep_alive and not conn.closed:
            conn.idle = True
            self._idle.setdefault(t.key, []).append(conn)
        else:
            self._discard(conn)
        if status != 200:
            try:
                payload = b"".join(d for _, d in (dechunk(reads) if chunked else reads))
            except ProtocolError:
                payload = b"".join(d for _, d in reads)
            text = payload.decode("utf-8", "replace")[:300]
            return RawResult(start, conn.end, status, reads, f"HTTP {status}: {text}")
        framing = "chunked" if chunked else "identity"
        return RawResult(start, conn.end, status, reads, framing=framing)

    def _take(self, key: tuple[str, int]) -> _Conn | None:
        idle = self._idle.get(key)
        while idle:
            conn = idle.pop()
            conn.idle = False
            if not conn.closed:
                return conn
        return None

    async def _exchange(self, conn: _Conn, request: bytes) -> None:
        waiter = asyncio.get_running_loop().create_future()
        conn.begin(waiter)
        if conn.transport is None or conn.closed:
            raise ServerDisconnectedError("connection closed before the request was sent")
        conn.transport.write(request)
        timer = asyncio.get_running_loop().call_later(
            self.timeout_s, conn.timed_out, self.timeout_s
        )
        try:
            await waiter
        finally:
            timer.cancel()

    def _discard(self, conn: _Conn) -> None:
        self._conns.discard(conn)
        if conn.transport is not None and not conn.closed:
            conn.transport.close()

    async def aclose(self) -> None:
        for conn in list(self._conns):
            conn.idle = False
            if conn.transport is not None:
                conn.transport.close()
        self._conns.clear()
        self._idle.clear()
        await asyncio.sleep(0)  # let the transports run their close callbacks
