"""Per-request metric math: a timed stream becomes a :class:`RequestRecord`.

TTFT, ITL, E2EL and TPOT = (E2EL - TTFT) / (output_tokens - 1), as defined in
:mod:`pocforge.metrics` and :mod:`pocforge.bench.client`. Kept apart from the client so
the arithmetic is tested on hand-built timelines.
"""

from __future__ import annotations

from collections.abc import Callable

from pocforge.bench.client import Api, ParsedStream, RawResult, parse_stream
from pocforge.bench.rawhttp import ProtocolError, dechunk
from pocforge.bench.records import RequestRecord, TokenSource


def build_record(
    raw: RawResult,
    api: Api,
    *,
    point: str,
    repeat: int,
    index: int,
    t0: float,
    scheduled_s: float,
    prompt_tokens: int | None,
    requested_output_tokens: int | None,
    count_tokens: Callable[[str], int] | None = None,
) -> RequestRecord:
    """Turn a finished request into a record; ``t0`` is the run's perf_counter origin."""
    sent_s = raw.start - t0
    base = {
        "point": point,
        "repeat": repeat,
        "index": index,
        "scheduled_s": scheduled_s,
        "sent_s": sent_s,
        "client_lag_ms": (sent_s - scheduled_s) * 1000.0,
        "http_status": raw.status,
        "requested_output_tokens": requested_output_tokens,
        "prompt_tokens": prompt_tokens,
        "prompt_tokens_source": "dataset" if prompt_tokens is not None else None,
    }
    if raw.error is not None:
        return RequestRecord(success=False, error=raw.error, **base)
    reads = raw.reads
    if raw.framing == "chunked":
        try:
            reads = dechunk(reads)
        except ProtocolError as exc:
            return RequestRecord(success=False, error=f"ProtocolError: {exc}", **base)
    parsed: ParsedStream = parse_stream(reads, api)
    base["token_chunks"] = len(parsed.token_times)
    base["empty_chunks"] = parsed.empty_chunks
    if parsed.error is not None:
        return RequestRecord(success=False, error=parsed.error, **base)
    if not parsed.token_times:
        return RequestRecord(success=False, error="stream ended without a token", **base)

    usage = parsed.usage or {}
    if usage.get("prompt_tokens") is not None:
        base["prompt_tokens"] = int(usage["prompt_tokens"])
        base["prompt_tokens_source"] = "server"
    out_tokens: int
    source: TokenSource
    if usage.get("completion_tokens") is not None:
        out_tokens, source = int(usage["completion_tokens"]), "server"
    elif count_tokens is not None:
        out_tokens, source = count_tokens(parsed.text), "tokenizer"
    else:
        out_tokens, source = len(parsed.token_times), "chunks"

    times = parsed.token_times
    ttft = (times[0] - raw.start) * 1000.0
    e2el = (raw.end - raw.start) * 1000.0
    itl = [(b - a) * 1000.0 for a, b in zip(times, times[1:], strict=False)]
    tpot = (e2el - ttft) / (out_tokens - 1) if out_tokens > 1 else None
    return RequestRecord(
        success=True,
        ttft_ms=ttft,
        e2el_ms=e2el,
        tpot_ms=tpot,
        itl_ms=itl,
        output_tokens=out_tokens,
        output_tokens_source=source,
        **base,
    )
