"""What a repeat keeps of a finished request: the same metrics as from its whole record,
in a fraction of the memory, and read back from a records file line by line."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from pocforge.bench.measured import Measured, read_measured
from pocforge.bench.records import RecordWriter, RequestRecord
from pocforge.bench.run_metrics import DISTRIBUTION_METRICS, peak_concurrency, run_metrics, samples


def record(i: int, *, success: bool = True, turn: int | None = None) -> RequestRecord:
    rng = np.random.default_rng(i)
    gaps = [float(g) for g in rng.uniform(2.0, 9.0, size=9)]
    if not success:
        return RequestRecord(
            point="c4", repeat=i % 2, index=i, success=False, error="HTTP 500",
            http_status=500, scheduled_s=0.1 * i, sent_s=0.1 * i, client_lag_ms=0.0,
        )  # fmt: skip
    return RequestRecord(
        point="c4", repeat=i % 2, index=i, success=True, scheduled_s=0.1 * i,
        sent_s=0.1 * i + 0.002, client_lag_ms=2.0, ttft_ms=float(rng.uniform(5, 50)),
        e2el_ms=100.0 + i, tpot_ms=float(np.mean(gaps)), itl_ms=gaps, prompt_tokens=64,
        prompt_tokens_source="server", output_tokens=10, output_tokens_source="server",
        requested_output_tokens=10, turn=turn, token_chunks=10, empty_chunks=1,
    )  # fmt: skip


RECORDS = [record(i, success=i % 7 != 3, turn=i % 3) for i in range(60)]


def test_the_figures_give_the_metrics_the_whole_records_give():
    kept = [Measured(r) for r in RECORDS]
    for metric in DISTRIBUTION_METRICS:
        assert np.array_equal(samples(kept, metric), samples(RECORDS, metric)), metric
    thresholds = {"ttft_ms": 30.0, "tpot_ms": 6.0}
    assert run_metrics(kept, 12.5, thresholds, 8) == run_metrics(RECORDS, 12.5, thresholds, 8)
    assert peak_concurrency(kept) == peak_concurrency(RECORDS)
    failed = next(m for m in kept if not m.success)
    assert failed.error == "HTTP 500" and failed.ttft_ms is None


def test_a_request_is_kept_in_under_a_third_of_its_records_memory():
    records = [record(i) for i in range(2000)]
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        copies = [RequestRecord.model_validate(r.model_dump()) for r in records]
        whole = tracemalloc.get_traced_memory()[0] - base
        del copies
        base = tracemalloc.get_traced_memory()[0]
        kept = [Measured(r) for r in records]
        small = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert len(kept) == 2000
    assert small < whole / 3, f"{small / 2000:.0f} B against {whole / 2000:.0f} B a request"


def test_a_records_file_is_read_back_line_by_line_and_a_torn_last_line_skipped(tmp_path):
    path = tmp_path / "requests-c4.jsonl"
    with RecordWriter(path) as writer:
        for r in RECORDS[:5]:
            writer.add(r)
    with path.open("a") as f:
        f.write(RECORDS[5].model_dump_json()[:40])  # a writer killed mid-line
    kept = list(read_measured(path))
    assert [m.index for m in kept] == [0, 1, 2, 3, 4]
    assert list(kept[0].itl_ms) == pytest.approx(RECORDS[0].itl_ms)
