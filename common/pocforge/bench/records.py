"""Per-request records and the JSONL file they are appended to as requests finish.

A record keeps everything needed to recompute every statistic later (send times, TTFT,
every inter-token gap, token counts and where they came from), so a summary can always
be rebuilt from ``requests-<point>.jsonl`` alone. Times are milliseconds; ``sent_s`` and
``scheduled_s`` are seconds from the start of the measured phase of the run.
"""

from __future__ import annotations

import os
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
    """Append records to a JSONL file, each one written the moment it is added.

    One ``write`` per record, no fsync: the OS page cache survives a killed client (a power
    cut is out of scope), so a run killed outright keeps every request that had finished.
    (Batching saved a system call per request, a few microseconds against a request's
    milliseconds, and lost up to two seconds of records to a SIGKILL.)
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self.written = 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def add(self, record: RequestRecord) -> None:
        line = (record.model_dump_json() + "\n").encode()
        view = memoryview(line)
        start = os.lseek(self._fd, 0, os.SEEK_END)
        try:
            while view:  # a regular file takes it whole; a short write is finished, not lost
                view = view[os.write(self._fd, view) :]
        except OSError as exc:
            os.ftruncate(self._fd, start)  # a full disk leaves whole lines only
            raise OSError(exc.errno, exc.strerror, str(self.path)) from exc  # name the file
        self.written += 1

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

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
