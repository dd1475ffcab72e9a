"""Per-request records and the JSONL file they are appended to as requests finish.

A record keeps everything needed to recompute every statistic later (send times, TTFT,
every inter-token gap, token counts and where they came from), so a summary can always
be rebuilt from ``requests-<point>.jsonl`` alone. Times are milliseconds; ``sent_s`` and
``scheduled_s`` are seconds from the start of the measured phase of the run.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

TokenSource = Literal["server", "tokenizer", "chunks", "dataset"]


class RequestRecord(BaseModel):
    """One measured request (warm-up requests are never recorded)."""

    model_config = ConfigDict(extra="forbid")

    point: str = Field(description="Sweep point id, e.g. 'c16' or 'r4'.")
    repeat: int = Field(description="Repeat number of the point, from 0.")
    index: int = Field(description="Request index within the repeat, in send order.")
    success: bool
    error: str | None = None
    http_status: int | None = None
    scheduled_s: float = Field(
        description="When the load generator meant to send it (s from run start)."
    )
    sent_s: float = Field(description="When the client started sending it (s from run start).")
    client_lag_ms: float = Field(description="sent - scheduled: how late the client was.")
    ttft_ms: float | None = None
    e2el_ms: float | None = None
    tpot_ms: float | None = Field(
        None, description="(E2EL - TTFT) / (output_tokens - 1); None for < 2 tokens."
    )
    itl_ms: list[float] = Field(
        default_factory=list, description="Gaps between token-carrying chunks."
    )
    prompt_tokens: int | None = None
    prompt_tokens_source: TokenSource | None = None
    output_tokens: int | None = None
    output_tokens_source: TokenSource | None = None
    requested_output_tokens: int | None = None
    turn: int | None = Field(
        None, description="multi_turn / doc_qa: the request's turn or round (0: a cache miss)."
    )
    token_chunks: int = Field(0, description="Streamed chunks that carried text.")
    empty_chunks: int = Field(0, description="Streamed chunks with choices but no text.")


class RecordWriter:
    """Append records to a JSONL file, flushing every ``batch`` records or ``interval_s``.

    Each flush writes whole lines and fsyncs nothing (the OS page cache survives a killed
    client; a power cut is out of scope), so an interrupted run keeps every flushed record.
    """

    def __init__(self, path: Path, batch: int = 256, interval_s: float = 2.0):
        self.path = Path(path)
        self.batch = batch
        self.interval_s = interval_s
        self._pending: list[str] = []
        self._last = time.monotonic()
        self.written = 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = self.path.open("a", encoding="utf-8")

    def add(self, record: RequestRecord) -> None:
        self._pending.append(record.model_dump_json())
        if len(self._pending) >= self.batch or time.monotonic() - self._last >= self.interval_s:
            self.flush()

    def flush(self) -> None:
        if self._pending:
            self._fh.write("\n".join(self._pending) + "\n")
            self.written += len(self._pending)
            self._pending.clear()
        self._fh.flush()
        self._last = time.monotonic()

    def close(self) -> None:
        self.flush()
        self._fh.close()

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_records(path: Path) -> list[RequestRecord]:
    """Load a JSONL file of records (a trailing partial line from a killed writer is skipped)."""
    out = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            try:
                out.append(RequestRecord.model_validate_json(line))
            except ValueError:
                continue
    return out
