"""The raw HTTP/1.1 transport: framing split anywhere, SSE edge cases, reuse, failures.

Network cases run a scripted server in the test's own event loop that writes its answer in
pieces with pauses between them, so every piece is a separate network read for the client.
"""

import asyncio
import itertools
import json
import random

import numpy as np
import pytest
from pydantic import ValidationError

from pocforge.bench.client import RawResult, resolve_transport
from pocforge.bench.config import SweepConfig
from pocforge.bench.datasets import DatasetConfig
from pocforge.bench.rawhttp import _CHUNK_SIZE, ProtocolError, RawTransport, _Conn, dechunk
from pocforge.bench.records import read_records
from pocforge.bench.request_metrics import build_record
from pocforge.bench.sweep import run_sweep

# Starts a subprocess (git for provenance, patch, the CLI) or opens a local socket.
pytestmark = pytest.mark.process


def ev(text=None, usage=None, crlf=False):
    if text is None:
        body = f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n"
    else:
        body = f"data: {json.dumps({'choices': [{'text': text}]})}\n\n"
    return (body.replace("\n", "\r\n") if crlf else body).encode()


def chunk(payload: bytes, ext: bytes = b"") -> bytes:
    return b"%x%s\r\n%s\r\n" % (len(payload), ext, payload)


HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
PAYLOADS = [b": ping\n\n", ev("a"), ev("b") + ev("c"), ev(usage={"completion_tokens": 3})]
BODY = b"".join(chunk(p) for p in PAYLOADS) + chunk(b"data: [DONE]\n\n", b";x=1")
BODY += b"0\r\nX-Trailer: 1\r\n\r\n"


def splits(data: bytes, cuts: list[int]) -> list[tuple[float, bytes]]:
    edges = [0, *sorted(set(cuts)), len(data)]
    return [(float(i), data[a:b]) for i, (a, b) in enumerate(itertools.pairwise(edges)) if b > a]


def test_dechunk_recovers_the_payload_whatever_the_reads():
    """Every two-way split and 200 random many-way splits give back the payload, byte for byte,
    each byte stamped with the read that carried it."""
    want = b"".join(PAYLOADS) + b"data: [DONE]\n\n"
    rng = random.Random(0)
    cases = [[i] for i in range(1, len(BODY))]
    cases += [rng.sample(range(1, len(BODY)), rng.randint(2, 40)) for _ in range(200)]
    for cuts in cases:
        reads = splits(BODY, cuts)
        out = dechunk(reads)
        assert b"".join(d for _, d in out) == want
        assert all(d for _, d in out) and [t for t, _ in out] == sorted({t for t, _ in out})


@pytest.mark.parametrize(
    "body, msg",
    [
        (b"zz\r\nab\r\n0\r\n\r\n", "bad chunk size"),
        (b"-1\r\nab\r\n0\r\n\r\n", "bad chunk size"),
        (b"2\r\nabXY0\r\n\r\n", "not followed by CRLF"),
        (b"2\r\nab\r\n", "ended before its last chunk"),
    ],
)
def test_dechunk_rejects_broken_framing(body, msg):
    with pytest.raises(ProtocolError, match=msg):
        dechunk([(1.0, body)])
    with pytest.raises(ProtocolError, match=msg):  # the same, a read per byte
        dechunk([(float(i), body[i : i + 1]) for i in range(len(body))])


def test_dechunk_checks_the_crlf_of_a_whole_chunk_read():
    """A read the size of a whole chunk whose last two bytes are not CRLF is not one."""
    with pytest.raises(ProtocolError, match="not followed by CRLF"):
        dechunk([(1.0, b"2\r\nabXY"), (2.0, b"0\r\n\r\n")])


def _feed(response: bytes, cuts: list[int]):
    """Drive a connection's protocol by hand; return (completed at read i or None, conn)."""
    loop = asyncio.new_event_loop()
    try:
        conn = _Conn(None, ("h", 1))
        waiter = loop.create_future()
        conn.begin(waiter)
        done_at = None
        for i, (_, piece) in enumerate(splits(response, cuts)):
            conn.data_received(piece)
            if waiter.done() and done_at is None:
                done_at = i
                waiter.result()  # raises if the protocol failed the request
        return done_at, len(splits(response, cuts)) - 1, conn
    finally:
        loop.close()


def test_end_of_response_is_found_exactly_at_its_last_byte():
    """Chunked (with a payload that looks like the terminator: '0\\r\\n\\r\\n' inside chunk data)
    and Content-Length responses, split at every position: done at the last read, not before."""
    tricky = (
        HEAD + chunk(b"data: 0\r\n\r\n") + chunk(b"data: 0\r\n") + chunk(b"\r\n") + b"0\r\n\r\n"
    )
    sized = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy"
    for response in (HEAD + BODY, tricky, sized):
        for cut in range(1, len(response)):
            done_at, last, conn = _feed(response, [cut])
            assert done_at == last, (response, cut)
            assert conn.keep_alive
        rng = random.Random(1)
        for _ in range(100):
            done_at, last, _ = _feed(response, rng.sample(range(1, len(response)), 8))
            assert done_at == last


def test_fast_path_and_general_path_agree_on_whole_chunk_reads():
    """One whole chunk per read takes the shortcut; the state left behind must still be right."""
    loop = asyncio.new_event_loop()
    conn = _Conn(None, ("h", 1))
    waiter = loop.create_future()
    conn.begin(waiter)
    conn.data_received(HEAD)
    assert conn.state == _CHUNK_SIZE
    for p in PAYLOADS:
        conn.data_received(chunk(p))
        assert conn.state == _CHUNK_SIZE and not waiter.done()
    conn.data_received(b"0\r\n\r\n")
    assert waiter.done() and len(conn.datas) == len(PAYLOADS) + 1
    loop.close()


# -- against scripted servers ------------------------------------------------------------


async def scripted(answers, gap_s=0.004):
    """A server answering each request on each connection from ``answers`` (a list per
    connection, in order): bytes pieces written with pauses, ``None`` = close instead."""
    conns = iter(answers)
    seen: list[list[bytes]] = []

    async def handle(reader, writer):
        script = next(conns)
        got: list[bytes] = []
        seen.append(got)
        try:
            for answer in script:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                got.append(head + await reader.readexactly(length))
                if answer is None:
                    break
                for piece in answer:
                    writer.write(piece)
                    await writer.drain()
                    await asyncio.sleep(gap_s)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}/v1/completions", seen


def run(coro):
    return asyncio.run(coro)


def pieces(response: bytes, size: int) -> list[bytes]:
    return [response[i : i + size] for i in range(0, len(response), size)]


def rec(raw: RawResult, api="completions"):
    return build_record(
        raw,
        api,
        point="c1",
        repeat=0,
        index=0,
        t0=raw.start,
        scheduled_s=0.0,
        prompt_tokens=4,
        requested_output_tokens=3,
    )


def test_stream_split_in_odd_pieces_with_crlf_comments_done_and_usage():
    """Chunk framing and events cut every 7 bytes, CRLF events, a comment, a usage-only final
    event and [DONE]: three tokens, usage from the server, each stamped with its read."""
    body = chunk(b": keep-alive\r\n\r\n") + chunk(ev("x", crlf=True)) + chunk(ev("y", crlf=True))
    body += chunk(ev("z", crlf=True) + ev(usage={"completion_tokens": 3}, crlf=True))
    body += chunk(b"data: [DONE]\r\n\r\n") + b"0\r\n\r\n"

    async def go():
        server, url, _ = await scripted([[[HEAD, *pieces(body, 7)]]])
        async with server:
            t = RawTransport()
            raw = await t.stream(url, b'{"p": 1}')
            await t.aclose()
        return raw

    raw = run(go())
    assert raw.error is None and raw.status == 200 and raw.framing == "chunked"
    assert len(raw.reads) >= len(body) // 7  # the pieces really were separate reads
    r = rec(raw)
    assert r.success and r.token_chunks == 3 and r.empty_chunks == 0
    assert (r.output_tokens, r.output_tokens_source) == (3, "server")
    assert r.itl_ms[0] > 0 and r.e2el_ms >= r.ttft_ms + sum(r.itl_ms) - 1e-6


def test_error_event_and_http_error_status():
    err = HEAD + chunk(b'data: {"error": {"message": "boom", "code": 400}}\n\n') + b"0\r\n\r\n"
    busy = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 12\r\n\r\nover capacit"

    async def go():
        server, url, _ = await scripted([[[err], [busy]]])
        async with server:
            t = RawTransport()
            out = [await t.stream(url, b"{}"), await t.stream(url, b"{}")]
            await t.aclose()
        return out

    event, status = run(go())
    r = rec(event)
    assert not r.success and r.error == "boom"
    assert status.status == 503 and status.error == "HTTP 503: over capacit"
    assert not rec(status).success and rec(status).http_status == 503


def test_connections_are_reused_unless_the_server_says_close():
    ok = HEAD + chunk(ev("a")) + b"0\r\n\r\n"
    closing = ok.replace(b"200 OK\r\n", b"200 OK\r\nConnection: close\r\n")

    async def go():
        server, url, seen = await scripted([[[ok], [ok], [closing]], [[ok]]])
        async with server:
            t = RawTransport()
            out = [await t.stream(url, b"{}") for _ in range(4)]
            opened = t.connections_opened
            await t.aclose()
        return out, opened, seen

    out, opened, seen = run(go())
    assert all(rec(r).success for r in out)
    assert opened == 2 and [len(s) for s in seen] == [3, 1]
    assert all(s.startswith(b"POST /v1/completions HTTP/1.1\r\n") for s in seen[0])


def test_server_closing_mid_stream_fails_the_request_and_keeps_what_came():
    async def go():  # the handler ends after the partial chunk: the socket closes
        server, url, _ = await scripted([[[HEAD, chunk(ev("a")), chunk(ev("b"))[:9]]]])
        async with server:
            t = RawTransport()
            raw = await t.stream(url, b"{}")
            await t.aclose()
        return raw

    raw = run(go())
    assert raw.status == 200 and raw.error.startswith("ServerDisconnectedError")
    assert len(raw.reads) >= 2 and not rec(raw).success


def test_a_kept_alive_connection_closed_by_the_server_is_retried_once_on_a_new_one():
    """The server reads the second request on the old connection and closes it unanswered
    (its keep-alive timer ran out): the client sends it again on a fresh connection."""
    ok = HEAD + chunk(ev("a")) + b"0\r\n\r\n"

    async def go():
        server, url, seen = await scripted([[[ok], None], [[ok]]])
        async with server:
            t = RawTransport()
            out = [await t.stream(url, b"{}"), await t.stream(url, b"{}")]
            opened = t.connections_opened
            await t.aclose()
        return out, opened, seen

    out, opened, seen = run(go())
    assert all(rec(r).success for r in out) and opened == 2
    assert [len(s) for s in seen] == [2, 1]


def test_timeout_and_unreachable_server():
    async def go():
        server, url, _ = await scripted([[[HEAD]]], gap_s=5.0)
        async with server:
            t = RawTransport(timeout_s=0.3)
            slow = await t.stream(url, b"{}")
            await t.aclose()
        server.close()
        await server.wait_closed()
        gone = await RawTransport().stream(url, b"{}")
        return slow, gone

    slow, gone = run(go())
    assert slow.error.startswith("TimeoutError") and slow.end - slow.start < 2.0
    assert gone.status is None and gone.error.startswith("ConnectionRefusedError")


def test_body_until_close_and_content_length():
    until_close = b"HTTP/1.0 200 OK\r\n\r\n" + ev("a") + ev("b")
    sized = ev("c")
    sized = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(sized) + sized

    async def go():
        server, url, _ = await scripted([[[until_close]], [[*pieces(sized, 5)]]])
        async with server:
            t = RawTransport()
            out = [await t.stream(url, b"{}"), await t.stream(url, b"{}")]
            await t.aclose()
        return out

    a, c = run(go())
    assert a.framing == "identity" and rec(a).token_chunks == 2
    assert c.framing == "identity" and rec(c).token_chunks == 1


def test_transport_choice():
    assert resolve_transport("auto", "http://h:1") == "raw"
    assert resolve_transport("auto", "HTTPS://h") == "aiohttp"
    assert resolve_transport("aiohttp", "http://h:1") == "aiohttp"
    with pytest.raises(ValidationError, match="transport"):
        SweepConfig(base_url="http://h", model="m", values=[1], transport="curl")
    with pytest.raises(ValueError, match="http:// only"):
        run(RawTransport().stream("https://h/v1/completions", b"{}"))


def test_both_transports_read_the_same_timeline(instrument, tiny_dir, tmp_path):
    """Same workload through each transport against the scripted server: same token counts,
    every request succeeds, TTFT and ITL medians agree within the instrument's own noise."""
    out = {}
    for kind in ("raw", "aiohttp"):
        cfg = SweepConfig(
            base_url=instrument,
            model="instrument",
            tokenizer=str(tiny_dir),
            dataset=DatasetConfig(isl="8", osl="6"),
            values=[3],
            num_prompts=12,
            api="chat",
            transport=kind,
        )
        s = run_sweep(cfg, tmp_path / kind)
        assert s.environment.transport == kind
        recs = read_records(tmp_path / kind / "requests-c3.jsonl")
        assert len(recs) == 12 and all(r.success and r.output_tokens == 6 for r in recs)
        out[kind] = recs
    med = {k: np.median([r.ttft_ms for r in v]) for k, v in out.items()}
    itl = {k: np.median([x for r in v for x in r.itl_ms]) for k, v in out.items()}
    assert abs(med["raw"] - med["aiohttp"]) < 5.0 and abs(itl["raw"] - itl["aiohttp"]) < 1.0
