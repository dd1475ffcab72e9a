"""The trtllm-bench importer on real printed reports (tests/data/importers/trtllm/, sources in
tests/data/README.md): every label generation read, the report_json form read the same way,
broken files refused with one line naming the file."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from pocforge.results.importers import FORMATS, ResultImportError, import_files, parse
from pocforge.results.importers.trtllm_bench import parse_text
from pocforge.results.serving import load_workload
from pocforge.results.verify import verify

D = Path(__file__).resolve().parents[1] / "data" / "importers"
T = D / "trtllm"
BLOG = T / "blog_llama31_8b_streaming_0.21.0rc0.txt"


@pytest.mark.parametrize(
    ("file", "version", "requests", "req_s", "out_tok_s", "per_gpu", "e2el_p99", "ttft_p99"),
    [
        (BLOG, "0.21.0rc0", 100, 86.5373, 11076.77, 11076.77, 1137.6817, 232.4339),
        (T / "perf_overview_doc_streaming.txt", None, 5000, 43.2089, 5530.7382, 5530.7382, 111618.2158, 106563.4497),
        (T / "issue6294_llama31_8b_fp8_h100.txt", None, 30000, 248.4751, 6957.303, 6957.303, 68887.7569, None),
        (T / "perf_benchmarking_doc_qwen2_vl_multimodal.txt", None, 10, 1.4439, 185.8351, 185.8351, 5514.4701, None),
        (T / "perf_benchmarking_doc_0.17.0_engine.txt", "0.17.0", 3000, 221.8002, 28390.4265, 28390.4265, None, None),
    ],
)  # fmt: skip
def test_printed_report_golden(
    file, version, requests, req_s, out_tok_s, per_gpu, e2el_p99, ttft_p99
) -> None:
    result = parse([file], "trtllm-bench", "chat").serving[0]
    assert (result.tool, result.tool_version, result.gpus) == ("trtllm-bench", version, 1)
    point = result.points[0]
    assert (point.id, point.mode, point.value, point.requests) == (
        file.stem,
        "unknown",
        None,
        requests,
    )
    m = point.metrics
    assert m["request_throughput"]["value"] == req_s
    assert m["output_throughput"]["value"] == out_tok_s
    assert m["output_throughput_per_gpu"]["value"] == per_gpu
    assert m.get("e2el_ms", {}).get("p99") == e2el_p99
    assert m.get("ttft_ms", {}).get("p99") == ttft_p99
    assert point.duration_s == pytest.approx(requests / req_s, rel=1e-4)
    assert result.definitions and result.differences


def test_streaming_report_maps_ttft_tpot_and_keeps_their_speed_in_notes() -> None:
    """The blog's --streaming run: TTFT/TPOT breakdowns become distributions; interactivity is
    ours (1000 / median TPOT), their 'Per User Output Speed' (mean of 1/TPOT) is a note."""
    result = parse([BLOG], "trtllm-bench", "chat").serving[0]
    m = result.points[0].metrics
    assert m["tpot_ms"] == {
        "min": 6.645, "max": 8.1306, "mean": 7.3272, "p50": 7.6079, "p90": 8.1246,
        "p95": 8.1289, "p99": 8.1306, "median": 7.6079,
    }  # fmt: skip
    assert (m["ttft_ms"]["median"], m["ttft_ms"]["mean"]) == (159.7857, 162.6706)
    assert (m["e2el_ms"]["min"], m["e2el_ms"]["mean"]) == (1050.1519, 1093.2284)
    assert m["total_token_throughput"]["value"] == 22153.5399
    assert m["interactivity"]["median"] == pytest.approx(1000.0 / 7.6079)
    assert "itl_ms" not in m
    assert any("137.148 tok/s/user" in n for n in result.notes)
    assert result.model == "meta-llama/Llama-3.1-8B-Instruct"
    assert "measured mean concurrency 94.605" in result.points[0].caveats[0]


def test_percentiles_are_order_statistics_and_flagged() -> None:
    """100 requests: trtllm-bench's p99 is its maximum (sorted[int(0.99 n)]), the difference
    the importer records against our interpolated percentiles."""
    m = parse([BLOG], "trtllm-bench", "chat").serving[0].points[0].metrics
    assert m["tpot_ms"]["p99"] == m["tpot_ms"]["max"] and m["ttft_ms"]["p99"] == m["ttft_ms"]["max"]
    differences = parse([BLOG], "trtllm-bench").serving[0].differences
    assert any("order statistic" in d.theirs for d in differences)
    assert {d.metric for d in differences} >= {"ttft_ms", "tpot_ms", "itl_ms", "interactivity"}


def test_017_token_throughput_is_output_tokens() -> None:
    """0.17 printed 'Token Throughput': 3000 requests × 128 output tokens / 13.5257 s, the
    output-token rate (imported as output_throughput), no total-token rate."""
    m = parse([T / "perf_benchmarking_doc_0.17.0_engine.txt"], "trtllm-bench").serving[0]
    rate = m.points[0].metrics["output_throughput"]["value"]
    assert rate == pytest.approx(3000 * 128 / 13.5256862, rel=1e-6)
    assert (
        m.model == "meta-llama/Llama-3.1-8B" and "total_token_throughput" not in m.points[0].metrics
    )


def test_requests_derived_when_the_report_omits_them() -> None:
    """The issue's excerpt starts below REQUEST DETAILS: requests = req/s × total latency."""
    result = parse([T / "issue6294_llama31_8b_fp8_h100.txt"], "trtllm-bench").serving[0]
    assert result.points[0].requests == 30000
    assert any("request throughput × total latency" in n for n in result.notes)
    assert any("without --streaming" in c for c in result.points[0].caveats)


def test_report_json_form_imports_like_the_text(tmp_path: Path) -> None:
    """No --report_json file was found published verbatim; this one is the blog's printed
    report written under the keys reporting.py's get_statistics_dict gives them (derived
    from the real text, not new numbers). Both forms give the same point."""
    report = parse_text(BLOG.read_text(), str(BLOG))
    assert set(report) == {
        "engine",
        "request_info",
        "world_info",
        "performance",
        "streaming_metrics",
    }
    assert report["performance"]["request_latency_percentiles_ms"]["p99"] == 1137.6817
    as_json = tmp_path / BLOG.name
    as_json.write_text(json.dumps(report, indent=2))
    from_json = parse([as_json], "trtllm-bench", "chat").serving[0]
    from_text = parse([BLOG], "trtllm-bench", "chat").serving[0]
    assert from_json.model_dump(exclude={"source_file"}) == from_text.model_dump(
        exclude={"source_file"}
    )


def _cut_before(text: str, marker: str) -> str:
    return text[: text.index(marker)]


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: _cut_before(BLOG.read_text(), "Request Throughput"), "without performance.request_throughput_req_s"),
        (lambda: _cut_before(BLOG.read_text(), "Total Latency"), r"without performance.total_latency_ms \(truncated\?\)"),
        (lambda: _cut_before(BLOG.read_text(), "= PERFORMANCE OVERVIEW"), "no '= PERFORMANCE OVERVIEW' section"),
        (lambda: json.dumps(parse_text(BLOG.read_text(), "b"))[:700], "not valid JSON"),
        (lambda: BLOG.read_bytes()[:300] + b"\x00\x01\xfe\xff" * 8, "binary data"),
        (lambda: (D / "vllm-c1.json").read_text(), "no 'performance' section"),
        (lambda: (D / "collectives" / "rccl_all_reduce_mi300x_1node_8gpu.txt").read_text(), "not a trtllm-bench report"),
        (lambda: "\n", "empty file"),
    ],
    ids=["truncated-text", "truncated-overview", "truncated-header", "truncated-json", "binary", "vllm-json", "rccl-text", "empty"],
)  # fmt: skip
def test_broken_files_give_one_line_naming_the_file(tmp_path: Path, make, match) -> None:
    """Truncations and a binary tail are made from the real blog report; the wrong-schema
    files are other tools' real output."""
    data = make()
    path = tmp_path / "report.txt"
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    with pytest.raises(ResultImportError, match=match) as info:
        parse([path], "trtllm-bench")
    message = str(info.value)
    assert message.startswith(str(path)) and "\n" not in message


def test_cli_choices_are_the_importer_formats() -> None:
    from pocforge.cli.results import import_cmd

    option = next(p for p in import_cmd.params if p.name == "fmt")
    assert isinstance(option.type, click.Choice) and list(option.type.choices) == list(FORMATS)


@pytest.mark.process
def test_import_run_end_to_end(store, tmp_path: Path) -> None:
    """Two reports into one run: the workload file reads back, the manifest verifies, the
    inputs are kept byte for byte; the CLI verb does the same with one clean line."""
    files = [BLOG, T / "perf_overview_doc_streaming.txt"]
    run = import_files(files, "trtllm-bench", store=store, as_ref="demo/trt", workload="chat")
    result = load_workload(run.path / "serving" / "chat")
    assert [p.id for p in result.points] == sorted(f.stem for f in files)
    assert verify(run.path).ok and run.manifest.imported_from.tool == "trtllm-bench"
    assert (run.path / "imported" / BLOG.name).read_bytes() == BLOG.read_bytes()

    from pocforge.cli.results import import_cmd

    root = str(tmp_path / "cli-results")
    ok = CliRunner().invoke(
        import_cmd, [str(BLOG), "--format", "trtllm-bench", "--as", "demo/t2", "--root", root]
    )
    assert ok.exit_code == 0, ok.output
    assert (
        tmp_path / "cli-results" / "demo" / "t2" / "serving" / "imported" / "result.json"
    ).exists()
    bad = CliRunner().invoke(
        import_cmd, [str(D / "vllm-c1.json"), "--format", "trtllm-bench", "--root", root]
    )
    assert bad.exit_code == 2 and len(bad.output.strip().splitlines()) == 1
    assert "Traceback" not in bad.output
