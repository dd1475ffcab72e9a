"""Records reach the JSONL as they are added and survive a torn last line; /metrics parsing."""

from pocforge.bench.promscrape import parse_metrics
from pocforge.bench.records import RecordWriter, RequestRecord, read_records


def _rec(i):
    return RequestRecord(
        point="c1",
        repeat=0,
        index=i,
        success=True,
        scheduled_s=0.0,
        sent_s=0.0,
        client_lag_ms=0.0,
        ttft_ms=1.0,
        e2el_ms=2.0,
    )


def test_writer_writes_each_record_at_once_and_reader_skips_a_torn_line(tmp_path):
    path = tmp_path / "requests-c1.jsonl"
    w = RecordWriter(path)
    for i in range(4):
        w.add(_rec(i))
        # on disk the moment it is added: a SIGKILL now loses nothing that had finished
        assert [r.index for r in read_records(path)] == list(range(i + 1))
    w.close()
    with path.open("a") as fh:
        fh.write('{"point": "c1", "rep')
    assert [r.index for r in read_records(path)] == [0, 1, 2, 3]


def test_parse_metrics_sums_labels_and_drops_buckets():
    text = """# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 2.0
# TYPE vllm:num_preemptions counter
vllm:num_preemptions_total{engine="0"} 4.0
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{le="1.0"} 2.0
vllm:e2e_request_latency_seconds_sum 1.5
vllm:e2e_request_latency_seconds_count 2.0
# TYPE process_cpu_seconds counter
process_cpu_seconds_total 9.0
"""
    m = parse_metrics(text)
    assert m["vllm:num_requests_running"] == 5.0
    assert m["vllm:num_preemptions_total"] == 4.0
    assert m["vllm:e2e_request_latency_seconds_count"] == 2.0
    assert not any(k.endswith("_bucket") for k in m) and "process_cpu_seconds_total" not in m
