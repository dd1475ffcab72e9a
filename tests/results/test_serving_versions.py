"""Serving importers on real outputs of several versions of each tool (tests/data/importers/
README.md says how each was made): each layout imports with the numbers its file prints,
or says what it lacks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pocforge.results.importers import parse

D = Path(__file__).resolve().parents[1] / "data" / "importers"
AIPERF = D / "aiperf"
GUIDELLM = D / "guidellm"


@pytest.mark.parametrize(
    ("folder", "version", "point", "ttft_p50", "ttft_p99", "output_tok_s"),
    [
        ("c1", "0.13.0", "c1", None, None, None),
        ("v0.10.0-r8", "0.10.0", "r8", 31.815793999999997, 66.57027185999999, 182.88934966373392),
        ("v0.10.0-c2", "0.10.0", "c2", 33.423954, 176.22362405999996, 366.94596621793676),
        ("v0.1.1-c2", None, "c2", 34.585639, 346.0222285099999, 378.6893780006073),
    ],
)
def test_aiperf_of_every_layout_keeps_its_load_point(
    folder, version, point, ttft_p50, ttft_p99, output_tok_s
):
    """AIPerf 0.10 on keeps the load in ``input_config.phases`` (a list: a request-rate run
    is ``{"type": "poisson", "rate": 8.0}``); 0.1 keeps every metric under ``records``."""
    (result,) = parse([AIPERF / folder / "profile_export_aiperf.json"], "aiperf").serving
    (found,) = result.points
    assert (result.tool_version, found.id, found.requests) == (
        version,
        point,
        60 if version == "0.13.0" else 40,
    )
    if ttft_p50 is not None:
        assert (found.metrics["ttft_ms"]["p50"], found.metrics["ttft_ms"]["p99"]) == (
            ttft_p50,
            ttft_p99,
        )
        assert found.metrics["output_throughput"]["value"] == output_tok_s
    if point == "r8":
        assert (found.mode, found.value) == ("rate", 8.0)


@pytest.mark.parametrize(
    ("folder", "model", "point", "ok", "failed", "ttft_p50", "ttft_p99", "output_tok_s"),
    [  # InferenceX agentic runs (tests/data/importers/README.md): NVIDIA B200, AMD MI355X
        (
            "v0.8.0-b200-vllm-c16",
            "/lustre/fsw/models/Kimi-K2.5-NVFP4",
            "c16",
            226,
            None,
            81049.56001649999,
            136256.29046274998,
            105.08698207629939,
        ),
        (
            "v0.8.0-b200-vllm-c24-1failed",
            "/lustre/fsw/models/Kimi-K2.5-NVFP4",
            "c24",
            1044,
            1,
            732.0305989999999,
            11873.263022689993,
            487.1577052482515,
        ),
        (
            "v0.8.0-mi355x-vllm-c4",
            "amd/Kimi-K2.5-MXFP4",
            "c4",
            286,
            None,
            1364.836181,
            16593.9432622999,
            126.74117412384639,
        ),
        (
            "v0.8.0-mi355x-sglang-c8",
            "amd/GLM-5.1-MXFP4",
            "c8",
            134,
            None,
            20556.263076,
            84741.06720241999,
            50.14453166523061,
        ),
    ],
)
def test_aiperf_0_8_on_gpus_of_both_vendors(
    folder, model, point, ok, failed, ttft_p50, ttft_p99, output_tok_s
):
    """AIPerf 0.8.0 against vLLM and SGLang on B200 and MI355X: the load point from
    ``input_config.loadgen``, the model it was pointed at, and the numbers the file prints."""
    (result,) = parse([AIPERF / folder / "profile_export_aiperf.json"], "aiperf").serving
    (found,) = result.points
    assert (result.tool_version, result.model) == ("0.8.0", model)
    assert (found.id, found.status, found.requests, found.failed) == (point, "ok", ok, failed)
    assert (found.metrics["ttft_ms"]["p50"], found.metrics["ttft_ms"]["p99"]) == (
        ttft_p50,
        ttft_p99,
    )
    assert found.metrics["output_throughput"]["value"] == output_tok_s


def test_aiperf_counts_failed_requests_not_kinds_of_error():
    """``error_summary`` lists error kinds with their counts: 1 kind, 1 request on B200 c24;
    the file's ``request_error_rate`` is a percent (1 of 1045)."""
    (result,) = parse(
        [AIPERF / "v0.8.0-b200-vllm-c24-1failed" / "profile_export_aiperf.json"], "aiperf"
    ).serving
    (point,) = result.points
    assert point.metrics["error_rate"]["value"] == pytest.approx(1 / 1045)
    assert point.caveats == ["1 request(s) failed: 1 × ClientOSError"]


def test_aiperf_0_1_says_what_its_layout_lacks():
    (result,) = parse([AIPERF / "v0.1.1-c2" / "profile_export_aiperf.json"], "aiperf").serving
    (point,) = result.points
    assert "itl_ms" not in point.metrics and point.duration_s is None
    assert point.caveats == [
        "AIPerf 0.1 layout (metrics under 'records'): no inter_chunk_latency (no ITL), no "
        "benchmark duration and no AIPerf version in the file"
    ]


@pytest.mark.parametrize("name", ["benchmarks-sync.json", "benchmarks-sync-warmup-cooldown.json"])
def test_guidellm_0_5_output_throughput_is_tokens_over_the_requests_own_span(name):
    """GuideLLM 0.5.4, one synchronous stream, with and without warm-up and cool-down: the
    benchmark's duration is the span of the requests it counts (to 20 µs), so output tokens
    / duration stays under the stream's ceiling (tokens / the requests' summed latency)."""
    path = GUIDELLM / "v0.5.4" / name
    data = json.loads(path.read_text())["benchmarks"][0]
    counted = [
        r for r in data["requests"]["successful"]
        if data["start_time"] <= r["request_start_time"] and r["request_end_time"] <= data["end_time"]
    ]  # fmt: skip
    tokens = sum(r["output_tokens"] for r in counted)
    span = max(r["request_end_time"] for r in counted) - min(
        r["request_start_time"] for r in counted
    )
    ceiling = tokens / sum(r["request_latency"] for r in counted)
    (result,) = parse([path], "guidellm").serving
    (point,) = result.points
    assert result.tool_version == "0.5.4" and point.requests == len(counted)
    throughput = point.metrics["output_throughput"]["value"]
    assert throughput == pytest.approx(tokens / span, rel=1e-4)
    assert throughput <= ceiling


L40S = D / "vllm-l40s" / "results.json"


def test_vllm_results_appended_to_one_file_are_told_apart_by_their_metadata():
    """Nine runs of vLLM's benchmark_serving (May 2025) appended to one file, three llm-d
    deployments × rates 10, 30 and inf on 4×L40S: each run's ``--metadata`` is a top-level
    key; ``deployment`` differs between runs at one rate and names them. Refused before
    ("not valid JSON: Extra data"). This vLLM counted no failures: unknown, not zero."""
    (result,) = parse([L40S], "vllm").serving
    points = {p.id: p for p in result.points}
    assert sorted(points) == sorted(
        f"{rate}-{deployment}"
        for rate in ("r10", "r30", "point")
        for deployment in ("no-features", "base", "kvcache")
    )
    base = points["r10-base"]
    assert (base.mode, base.value, base.requests, base.failed) == ("rate", 10.0, 300, None)
    assert base.metrics["output_throughput"]["value"] == 2282.2747096685353
    assert "error_rate" not in base.metrics and "goodput" not in base.metrics
    assert points["point-kvcache"].metrics["output_throughput"]["value"] == 11011.349280220396
    assert result.model == "meta-llama/Llama-3.2-3B-Instruct"


MI355X_PD = D / "vllm-mi355x-pd"


def test_a_vllm_sweep_on_mi355x_disaggregated_reads_as_printed():
    """InferenceX's copy of vLLM's benchmark_serving against vLLM prefill/decode
    disaggregated over MoRI-IO on two nodes of 8×MI355X (gpt-oss-120b, 1k/1k, April 2026):
    three files of one sweep are one result of three points; this copy counts no failures
    and writes ``"request_goodput:": null``."""
    files = sorted(MI355X_PD.glob("*.json"))
    (result,) = parse(files, "vllm", gpus=16).serving
    points = {p.id: p for p in result.points}
    assert sorted(points) == ["c256", "c32", "c4"]
    c256 = points["c256"]
    assert (c256.requests, c256.failed, c256.duration_s) == (2560, None, 187.5680166000966)
    assert c256.metrics["output_throughput"]["value"] == 13975.943487151262
    assert c256.metrics["output_throughput_per_gpu"]["value"] == pytest.approx(
        13975.943487151262 / 16
    )
    assert c256.metrics["ttft_ms"]["median"] == 215.23276844527572
    assert c256.metrics["tpot_ms"]["p99"] == 17.904399000923036
    assert "goodput" not in c256.metrics and "error_rate" not in c256.metrics
    assert points["c4"].metrics["output_throughput"]["value"] == 459.21607175182197


def test_a_detailed_result_appended_twice_keeps_each_runs_records(tmp_path):
    """vLLM's ``--append-result`` writes a second run of the same point to the same file
    (here the real c1 file's run twice, as that flag appends it): two points, c1 and c1-2,
    each with its own per-request file in the run it imports into."""
    import json

    from pocforge.results.importers import import_files
    from pocforge.results.store import RunStore

    run = json.loads((D / "vllm-c1.json").read_text())
    path = tmp_path / "appended.json"
    path.write_text(json.dumps(run) + "\n" + json.dumps(run) + "\n")
    (result,) = parse([path], "vllm").serving
    assert [(p.id, p.records_file) for p in result.points] == [
        ("c1", "requests-c1.jsonl"),
        ("c1-2", "requests-c1-2.jsonl"),
    ]
    written = import_files([path], "vllm", store=RunStore(tmp_path / "runs"), workload="chat")
    folder = written.path / "serving" / "chat"
    for name in ("requests-c1.jsonl", "requests-c1-2.jsonl"):
        lines = (folder / name).read_text().splitlines()
        assert len(lines) == run["completed"] + (run.get("failed") or 0)
        assert json.loads(lines[0])["point"] == name.removeprefix("requests-").removesuffix(
            ".jsonl"
        )
