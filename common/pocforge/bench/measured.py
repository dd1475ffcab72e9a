"""What the client keeps in memory of each finished request once its record is on disk.

A :class:`~pocforge.bench.records.RequestRecord` is the file's format: a pydantic model,
about 1.8 kB for a request of ten tokens. A repeat keeps every request's figures until its
metrics and verdicts are computed (percentiles and their intervals are exact: they need
every sample), so a long repeat's memory is this figure times its requests. A
:class:`Measured` keeps only those figures, in slots, with the inter-token gaps in a packed
array: under a third of the record's size (``tests/bench/test_measured.py`` measures it). Everything else of a request (its sources, statuses,
requested length) stays in the records file, which is what the run keeps.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from pathlib import Path

from pocforge.bench.records import RequestRecord


class Measured:
    """A request's figures that the repeat's metrics, verdicts and client health read."""

    __slots__ = (
        "index",
        "repeat",
        "success",
        "error",
        "sent_s",
        "client_lag_ms",
        "ttft_ms",
        "e2el_ms",
        "tpot_ms",
        "itl_ms",
        "prompt_tokens",
        "output_tokens",
        "turn",
        "token_chunks",
        "empty_chunks",
    )

    def __init__(self, record: RequestRecord):
        self.index = record.index
        self.repeat = record.repeat
        self.success = record.success
        self.error = record.error
        self.sent_s = record.sent_s
        self.client_lag_ms = record.client_lag_ms
        self.ttft_ms = record.ttft_ms
        self.e2el_ms = record.e2el_ms
        self.tpot_ms = record.tpot_ms
        self.itl_ms = array("d", record.itl_ms)
        self.prompt_tokens = record.prompt_tokens
        self.output_tokens = record.output_tokens
        self.turn = record.turn
        self.token_chunks = record.token_chunks
        self.empty_chunks = record.empty_chunks


def read_measured(path: Path) -> Iterator[Measured]:
    """The figures of every record in a JSONL file, one line at a time (a trailing partial
    line from a killed writer is skipped, as :func:`~pocforge.bench.records.read_records`
    does); the file is never held whole."""
    with Path(path).open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                try:
                    yield Measured(RequestRecord.model_validate_json(line))
                except ValueError:
                    continue
