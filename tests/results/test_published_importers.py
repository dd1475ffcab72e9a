"""Competitor numbers from publications: MLPerf Inference LoadGen summaries (real files of
the v4.1 round) and the kit's small "published" YAML (numbers transcribed from a vendor's
page, with source and date), each labelled as not measured here."""

from __future__ import annotations

from pathlib import Path

import pytest

from pocforge.results.importers import ResultImportError, parse

from .conftest import DATA

MLPERF = DATA / "mlperf"
SERVER = MLPERF / "v4.1_nvidia_h200x8_trt_llama2-70b-99_server_summary.txt"
OFFLINE = MLPERF / "v4.1_nvidia_h200x8_trt_llama2-70b-99_offline_summary.txt"
PUBLISHED = DATA / "published" / "trtllm_perf_overview_llama33_70b_fp8_h200.yaml"


def test_mlperf_server_summary_gives_tokens_and_latencies():
    (result,) = parse([SERVER], "mlperf", "chat", gpus=8).serving
    (point,) = result.points
    assert point.id == "server" and point.mode == "rate" and point.value == 101
    assert point.metrics["output_throughput"]["value"] == 29228.22
    assert point.metrics["output_throughput_per_gpu"]["value"] == pytest.approx(29228.22 / 8)
    assert point.metrics["request_throughput"]["value"] == 100.35
    # nanoseconds in the file, milliseconds here
    assert point.metrics["ttft_ms"]["p99"] == pytest.approx(452.744202)
    assert point.metrics["tpot_ms"]["median"] == pytest.approx(124.285539)
    assert point.metrics["interactivity"]["median"] == pytest.approx(1000 / 124.285539)
    assert point.metrics["e2el_ms"]["p99.9"] == pytest.approx(132503.046236)
    assert point.status == "ok"
    assert any("TTFT limit 2000 ms, TPOT limit 200 ms" in c for c in point.caveats)


def test_mlperf_offline_has_throughput_without_latency():
    (result,) = parse([OFFLINE], "mlperf", "chat", gpus=8).serving
    (point,) = result.points
    assert point.id == "offline" and point.metrics["output_throughput"]["value"] == 31302.7
    assert "tpot_ms" not in point.metrics and "interactivity" not in point.metrics


def test_mlperf_invalid_run_is_a_failed_point(tmp_path):
    bad = tmp_path / "summary.txt"
    bad.write_text(SERVER.read_text().replace("Result is : VALID", "Result is : INVALID"))
    (point,) = parse([bad], "mlperf", "chat").serving[0].points
    assert point.status == "failed" and "INVALID" in point.caveats[0]


def test_published_yaml_is_labelled_and_per_gpu():
    (result,) = parse([PUBLISHED], "published", "chat").serving
    (point,) = result.points
    assert result.gpus == 1 and result.model == "nvidia/Llama-3.3-70B-Instruct-FP8"
    assert point.metrics["output_throughput_per_gpu"]["value"] == 2909
    assert point.caveats == ["published, not measured here"]
    assert "read 2026-12-01" in result.notes[0] and "ISL 1000 / OSL 1000" in result.notes[0]


@pytest.mark.parametrize(
    ("fmt", "content", "expected"),
    [
        ("mlperf", b"\x00\x01\xff binary", "not text"),
        ("mlperf", b"", "not an MLPerf LoadGen summary"),
        ("mlperf", b"MLPerf Results Summary\nScenario : Server\n", "without a scenario or tokens"),
        ("published", b"publisher: [unclosed", "not valid YAML"),
        ("published", b"- a list", "a published result is a mapping"),
        ("published", b"\xff\xfe", "not text"),
    ],
)
def test_bad_files_fail_in_one_line(tmp_path, fmt, content, expected):
    path = tmp_path / "file"
    path.write_bytes(content)
    with pytest.raises(ResultImportError, match=expected) as info:
        parse([path], fmt)
    assert "\n" not in str(info.value) and str(path) in str(info.value)


def test_published_field_errors_name_the_field(tmp_path):
    text = PUBLISHED.read_text()
    for broken, where in [
        (text.replace("seen: 2026-12-01", "seen: yesterday"), "seen"),
        (text.replace("https://github.com", "ftp://github.com"), "source"),
        (text.replace("output_throughput: 2909", "tpot_ms: 20"), "points.0"),
        (text + "extra: 1\n", "extra"),
    ]:
        path = tmp_path / "published.yaml"
        path.write_text(broken)
        with pytest.raises(ResultImportError, match=rf"published.yaml: {where}"):
            parse([path], "published")


def test_the_shipped_price_table_names_catalog_gpus():
    from pocforge.catalog import gpu_names
    from pocforge.catalog.prices import gpu_price, price_bases

    for basis in price_bases().values():
        assert set(basis.per_gpu_hour) <= set(gpu_names()), basis
        assert basis.source.startswith("https://")
    assert gpu_price("MI300X", "owning-hyperscaler-tco") == 1.12
    assert gpu_price("H200", "owning-hyperscaler-tco") is None  # not published there
    with pytest.raises(KeyError, match="unknown price basis 'retail'"):
        gpu_price("MI300X", "retail")


def test_pocs_folder_copies_are_the_fixtures():
    """The example POC's competitor files are the same bytes as the tested fixtures."""
    folder = Path(__file__).parents[2] / "pocs" / "llama-3.1-70b-bf16-mi300x-vllm" / "competitors"
    for fixture in (SERVER, PUBLISHED):
        assert (folder / fixture.name).read_bytes() == fixture.read_bytes()


AMD_SERVER = MLPERF / "v4.1_amd_8xmi300x_vllm_llama2-70b-99_server_summary.txt"
AMD_OFFLINE = MLPERF / "v4.1_amd_8xmi300x_vllm_llama2-70b-99_offline_summary.txt"


def test_mlperf_summaries_of_amds_vllm_submission_read_alike():
    """AMD's v4.1 closed submission (8×MI300X, vLLM, a ``PySUT``): its Server summary pads
    ``Completed samples per second    :`` where NVIDIA's does not, and its offline run ends
    with "9 warnings encountered", said (the warnings are in the detailed log)."""
    (server,) = parse([AMD_SERVER], "mlperf", "chat", gpus=8).serving[0].points
    assert (server.id, server.mode, server.value, server.status) == ("server", "rate", 73.5, "ok")
    assert server.metrics["output_throughput"]["value"] == 21028.23
    assert server.metrics["request_throughput"]["value"] == 71.74
    assert server.metrics["ttft_ms"]["p99"] == pytest.approx(1604.171041)
    assert server.metrics["tpot_ms"]["median"] == pytest.approx(143.943044)
    assert server.caveats == ["MLPerf Server scenario: TTFT limit 2000 ms, TPOT limit 200 ms"]
    (offline,) = parse([AMD_OFFLINE], "mlperf", "chat", gpus=8).serving[0].points
    assert offline.metrics["output_throughput"]["value"] == 23514.8
    assert offline.metrics["e2el_ms"]["median"] == pytest.approx(900756.542973)
    assert offline.caveats == [
        "LoadGen reported 9 warning(s) in its detailed log (mlperf_log_detail.txt), which "
        "this summary does not hold"
    ]


@pytest.mark.parametrize(
    ("name", "point", "per_gpu", "tpot", "ttft"),
    [
        (
            "inferencex_kimik2.5_int4_mi355x_vllm_1k1k_c4.yaml",
            "c4",
            27.678011491816765,
            17.393898241078155,
            296.9768075272441,
        ),
        (
            "inferencex_kimik2.5_int4_mi355x_vllm_8k1k_c32.yaml",
            "c32",
            17.57057269511527,
            230.31720386957874,
            1816.827566944994,
        ),
    ],
)
def test_inferencex_rows_on_mi355x_are_published_per_gpu_numbers(name, point, per_gpu, tpot, ttft):
    """Two InferenceX result rows (vLLM 0.21.0 on 8×MI355X) transcribed: per-GPU output
    throughput becomes the total for the row's 8 GPUs, its medians stay as printed."""
    (result,) = parse([DATA / "published" / name], "published", "chat").serving
    (found,) = result.points
    concurrency = float(point.removeprefix("c"))
    assert (result.gpus, found.id, found.mode, found.value) == (
        8,
        point,
        "concurrency",
        concurrency,
    )
    assert found.metrics["output_throughput"]["value"] == pytest.approx(per_gpu * 8)
    assert found.metrics["tpot_ms"]["median"] == tpot
    assert found.metrics["ttft_ms"]["median"] == ttft
    assert found.caveats == ["published, not measured here"]
