"""Golden tests of every importer on real tool output (tests/data/importers/README.md says
how each file was produced) and the rules they carry about definitions."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from pocforge.results.importers import ResultImportError, import_files, parse
from pocforge.results.serving import load_workload
from pocforge.results.verify import verify

# Starts a subprocess (git for provenance, patch, the CLI) or opens a local socket.
pytestmark = pytest.mark.process

D = Path(__file__).resolve().parents[1] / "data" / "importers"
SERVING = {
    # format: (files, point ids, last point: ttft p99 (median for MAD), tpot median, output tok/s, requests)
    "vllm": (
        [D / "vllm-c1.json", D / "vllm-c4.json"],
        ["c1", "c4"],
        35.26099257998567,
        1.9466064999998405,
        1336.7810252756185,
        60,
    ),
    "sglang": (
        [D / "sglang-c1.jsonl", D / "sglang-c4.jsonl"],
        ["c1", "c4"],
        76.93996438000558,
        6.522634933336728,
        460.20505809307843,
        60,
    ),
    "aiperf": (
        [D / "aiperf/c1/profile_export_aiperf.json", D / "aiperf/c4/profile_export_aiperf.json"],
        ["c1", "c4"],
        87.48512472999992,
        10.657630638095236,
        293.29262040705254,
        60,
    ),
    "guidellm": (
        [D / "guidellm/benchmarks.json"],
        ["c1", "c4"],
        47.149658203125,
        7.87967046101888,
        449.7057128535855,
        60,
    ),
    "mad": (
        [D / "mad/perf_Kimi-K3.csv"],
        ["c1"],
        528.9972266182303,
        25.388604126196313,
        8.090459471567009,
        10,
    ),
}


@pytest.mark.parametrize("fmt", SERVING)
def test_serving_importer_golden(fmt: str) -> None:
    files, ids, ttft, tpot, tput, requests = SERVING[fmt]
    result = parse(files, fmt, "chat", gpus=1).serving[0]
    assert result.tool == fmt and [p.id for p in result.points] == ids
    last = result.points[-1]
    assert last.metrics["ttft_ms"].get(
        "p99", last.metrics["ttft_ms"].get("median")
    ) == pytest.approx(ttft)
    assert last.metrics["tpot_ms"]["median"] == pytest.approx(tpot)
    assert last.metrics["output_throughput"]["value"] == pytest.approx(tput)
    assert last.metrics["output_throughput_per_gpu"]["value"] == pytest.approx(tput)
    assert last.metrics["interactivity"]["median"] == pytest.approx(1000.0 / tpot)
    assert last.requests == requests and result.differences


def test_guidellm_tpot_is_their_itl_and_flagged() -> None:
    """GuideLLM's time_per_output_token includes the first token; its ITL is our TPOT."""
    result = parse([D / "guidellm/benchmarks.json"], "guidellm", "chat").serving[0]
    c4 = result.points[-1]
    assert c4.metrics["tpot_incl_first_ms"]["median"] > c4.metrics["tpot_ms"]["median"]
    assert "itl_ms" not in c4.metrics
    assert any(
        d.metric == "tpot_ms" and "includes the first token" in d.theirs for d in result.differences
    )
    assert c4.metrics["e2el_ms"]["median"] > 100  # request_latency seconds -> ms


def test_aiperf_itl_is_our_tpot() -> None:
    result = parse([D / "aiperf/c4/profile_export_aiperf.json"], "aiperf", "chat").serving[0]
    c4 = result.points[0]
    assert c4.metrics["tpot_ms"]["p50"] == pytest.approx(
        10.657630638095236
    )  # their inter_token_latency
    assert c4.metrics["itl_ms"]["p50"] == pytest.approx(
        11.591923999999999
    )  # their inter_chunk_latency
    assert "inter_token_latency" in result.differences[0].theirs


def test_vllm_detailed_becomes_records(store) -> None:
    """--save-detailed per-request data is kept as bench records; their TTFT p99 matches."""
    import numpy as np

    run = import_files(
        [D / "vllm-c1.json", D / "vllm-c4.json"],
        "vllm",
        store=store,
        as_ref="demo/vllm",
        workload="chat",
    )
    result = load_workload(run.path / "serving" / "chat")
    from pocforge.bench.records import read_records

    recs = read_records(run.path / "serving" / "chat" / "requests-c4.jsonl")
    assert len(recs) == 60 and all(r.success for r in recs)
    ttft = np.array([r.ttft_ms for r in recs])
    assert np.percentile(ttft, 99) == pytest.approx(result.points[1].metrics["ttft_ms"]["p99"])
    assert verify(run.path).ok and (run.path / "imported" / "vllm-c4.json").exists()
    assert run.manifest.spec["poc"]["name"] == "demo" and run.manifest.imported_from.tool == "vllm"


@pytest.mark.parametrize(
    ("file", "tool", "collective", "ranks", "nodes", "rows", "busbw", "avg"),
    [
        (
            "rccl_all_reduce_mi300x_1node_8gpu.txt",
            "rccl-tests",
            "all_reduce",
            8,
            1,
            31,
            315.69,
            110.464,
        ),
        (
            "nccl_all_reduce_h100_2node_16gpu.txt",
            "nccl-tests",
            "all_reduce",
            16,
            2,
            31,
            338.82,
            70.742,
        ),
        ("nccl_alltoall_gb300_1node_4gpu.txt", "nccl-tests", "alltoall", 4, 1, 2, 627.69, 381.478),
        # Older rccl-tests print rank lines without "Group N".
        (
            "rccl_all_reduce_mi300x_2node_16gpu.txt",
            "rccl-tests",
            "all_reduce",
            16,
            2,
            32,
            357.46,
            92.3318,
        ),
    ],
)
def test_collectives_golden(file, tool, collective, ranks, nodes, rows, busbw, avg) -> None:
    c = parse([D / "collectives" / file], "nccl-tests").collectives[0]
    assert (c.tool, c.collective, c.ranks, c.nodes, len(c.rows)) == (
        tool,
        collective,
        ranks,
        nodes,
        rows,
    )
    assert c.rows[-1].busbw_gbs == busbw and c.avg_busbw_gbs == avg and c.out_of_bounds == 0


@pytest.mark.parametrize(
    ("fmt", "file", "match"),
    [
        ("vllm", "sglang-c1.jsonl", "not a vllm bench serve result"),
        ("sglang", "vllm-c1.json", "missing median_e2e_latency_ms"),
        ("aiperf", "vllm-c1.json", "not an AIPerf"),
        ("guidellm", "vllm-c1.json", "no 'benchmarks' list"),
        ("mad", "vllm-c1.json", "not a MAD perf CSV"),
        ("nccl-tests", "vllm-c1.json", "no nccl-tests"),
    ],
)
def test_wrong_format_is_one_clear_error(fmt: str, file: str, match: str) -> None:
    with pytest.raises(ResultImportError, match=match):
        parse([D / file], fmt)


def test_cli_import(tmp_path: Path) -> None:
    from pocforge.cli.results import import_cmd

    runner = CliRunner()
    root = str(tmp_path / "results")
    ok = runner.invoke(
        import_cmd,
        [
            str(D / "guidellm/benchmarks.json"),
            "--format",
            "guidellm",
            "--as",
            "demo/gl",
            "--root",
            root,
        ],
    )
    assert ok.exit_code == 0, ok.output
    assert (tmp_path / "results" / "demo" / "gl" / "serving" / "imported" / "result.json").exists()
    bad = runner.invoke(import_cmd, [str(D / "vllm-c1.json"), "--format", "aiperf", "--root", root])
    assert (
        bad.exit_code == 2
        and len(bad.output.strip().splitlines()) == 1
        and "Traceback" not in bad.output
    )
