"""The report vLLM's and SGLang's serving benchmarks print, as it is pasted into recipes,
docs and issues (tests/data/importers/README.md names each file's source): each imports
with the numbers it prints and says what a printed report cannot give, a template or the
other tool's report is refused naming the line or the format."""

from __future__ import annotations

from pathlib import Path

import pytest

from pocforge.results.importers import ResultImportError, parse
from pocforge.results.importers.serving_report import PRINTED

D = Path(__file__).resolve().parents[1] / "data" / "importers" / "serving-reports"


def _points(name: str, fmt: str = "vllm") -> dict:
    (result,) = parse([D / name], fmt).serving
    assert result.tool == fmt and result.tool_version is None
    return {p.id: p for p in result.points}


def test_vllm_on_mi300x_with_failed_and_concurrency_lines_inside_the_report():
    """vllm bench serve against Ministral-3-14B on one MI300X (vLLM's recipes), a report that
    prints its failed requests (since vLLM pull request #26478, October 2025) and its
    concurrency limit inside the block."""
    (point,) = _points("vllm_recipes_ministral3_14b_mi300x.txt").values()
    assert (point.id, point.mode, point.value) == ("c32", "concurrency", 32.0)
    assert (point.requests, point.failed, point.duration_s) == (100, 0, 52.76)
    assert point.metrics["ttft_ms"] == {"mean": 1228.72, "median": 952.25, "p99": 2925.25}
    assert point.metrics["tpot_ms"] == {"mean": 12.22, "median": 12.25, "p99": 12.83}
    assert point.metrics["itl_ms"] == {"mean": 12.22, "median": 11.78, "p99": 13.66}
    assert point.metrics["output_throughput"] == {"value": 1940.79}
    assert point.metrics["total_token_throughput"] == {"value": 3881.58}
    assert point.metrics["error_rate"] == {"value": 0.0}
    assert point.caveats == [PRINTED]


def test_two_reports_of_two_vllm_layouts_on_h200_are_two_points():
    """Kimi-K2 on 16×H200 (vLLM's recipes): a report without any load line, then (after
    ``-dcp 8``) one of a later vLLM that prints ``Request rate configured (RPS)``."""
    points = _points("vllm_recipes_kimi_k2_16xh200.txt")
    assert sorted(points) == ["point", "r10000"]
    before, after = points["point"], points["r10000"]
    assert (before.mode, before.value, before.requests) == ("unknown", None, 16)
    assert (after.mode, after.value) == ("rate", 10000.0)
    assert before.metrics["output_throughput"] == {"value": 254.99}
    assert after.metrics["output_throughput"] == {"value": 339.38}
    assert after.metrics["ttft_ms"]["median"] == 1932.03
    assert before.failed is None  # this layout prints no failed count


def test_a_report_after_a_tip_line_and_one_indented_in_markdown_read_alike():
    """Step-3.5-Flash on 4×H200 (a ``tip:`` line above the block) and gpt-oss-120b on 2×H100
    as gpustack's performance lab quotes it (indented four spaces, vLLM v0.10.2)."""
    (step,) = _points("vllm_recipes_step35_flash_4xh200.txt").values()
    assert (step.id, step.requests, step.failed) == ("c10", 100, 0)
    assert step.metrics["itl_ms"] == {"mean": 11.91, "median": 11.78, "p99": 13.45}
    (gpt,) = _points("vllm_gpustack_gpt_oss_120b_2xh100.txt").values()
    assert (gpt.id, gpt.requests, gpt.duration_s) == ("point", 1000, 67.4)
    assert gpt.metrics["total_token_throughput"] == {"value": 6095.37}
    assert gpt.metrics["tpot_ms"]["mean"] == 54.1


def test_a_template_is_refused_naming_its_line():
    """vLLM's Llama 3.3 recipe shows the report with ``xxxxxx`` for every number."""
    with pytest.raises(ResultImportError, match=r"template.txt:2: 'Successful requests' is "):
        parse([D / "vllm_recipes_llama33_template.txt"], "vllm")


def test_the_other_tools_report_is_refused_naming_the_format_to_use():
    with pytest.raises(ResultImportError, match="is vLLM's .* --format vllm"):
        parse([D / "vllm_recipes_ministral3_14b_mi300x.txt"], "sglang")
    with pytest.raises(ResultImportError, match="SGLang's bench_serving .* --format sglang"):
        parse([D / "sglang_achatbot_gpt_oss_20b_h100_cut.txt"], "vllm")


def test_sglang_reports_cut_where_the_thread_store_cut_them_say_so():
    """SGLang's report on an H100 (gpt-oss-20b at concurrency 4) and SGLang 0.4.0.post2's
    (``Max reqeuest concurrency: not set``, as it spelled it), both cut before their
    closing rule: what they hold is imported, the cut said."""
    (h100,) = _points("sglang_achatbot_gpt_oss_20b_h100_cut.txt", "sglang").values()
    assert (h100.id, h100.requests, h100.duration_s) == ("c4", 20, 42.49)
    assert h100.metrics["e2el_ms"] == {"mean": 8432.23, "median": 8560.3}
    assert h100.metrics["ttft_ms"] == {"mean": 2731.0, "median": 2465.51, "p99": 6884.07}
    assert "itl_ms" not in h100.metrics
    assert h100.caveats[1].startswith("the report of line 1 is cut before its closing rule")
    (old,) = _points("sglang_issue2805_0.4.0.post2_cut.txt", "sglang").values()
    assert (old.id, old.mode, old.requests) == ("point", "unknown", 1648)
    assert old.metrics["ttft_ms"] == {"mean": 44294.8}  # the median's line has no value
    assert old.metrics["total_token_throughput"] == {"value": 4081.34}


def test_launcher_and_logging_prefixes_are_stripped(tmp_path):
    """The MI300X report as a Python logger prints it (the prefix of SGLang's report in
    Ascend/sglang issue #129: ``2026-03-19 20:42:17,548 - INFO - ``), as
    ``mpirun --tag-output`` does and as ``kubectl logs --prefix --timestamps`` does: the
    same point."""
    text = (D / "vllm_recipes_ministral3_14b_mi300x.txt").read_text()
    plain = _points("vllm_recipes_ministral3_14b_mi300x.txt")["c32"]
    for prefix in (
        "2026-03-19 20:42:17,548 - INFO - ",
        "[1,0]<stdout>:",
        # kubectl logs --prefix --timestamps, as tests/results/test_nccl_import.py quotes them
        "[pod/y-844fbc9777-vhl79/nginx] 2023-08-17T07:52:26.131134150Z ",
    ):
        path = tmp_path / "prefixed.txt"
        path.write_text("".join(prefix + line + "\n" for line in text.splitlines()))
        (point,) = parse([path], "vllm").serving[0].points
        assert point.model_dump() == plain.model_dump()


def test_reports_at_one_load_point_stay_apart(tmp_path):
    """A before/after pasted together (the same concurrency twice): kept as c32 and c32-2,
    never merged, said."""
    text = (D / "vllm_recipes_ministral3_14b_mi300x.txt").read_text()
    path = tmp_path / "before-after.txt"
    path.write_text(f"before\n{text}\nafter\n{text}")
    (result,) = parse([path], "vllm").serving
    assert [p.id for p in result.points] == ["c32", "c32-2"]
    assert result.notes == [
        "before-after.txt: point c32: run 2 at the same load point kept as c32-2"
    ]


def test_a_text_without_a_report_is_refused(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("Serving went well: 1940 tok/s on one MI300X.\n")
    with pytest.raises(ResultImportError, match="not valid JSON"):
        parse([path], "vllm")


def test_older_vllm_prints_the_load_point_above_its_report():
    """Kubernetes job logs of three runs of vLLM's benchmark_serving (May 2025, 4×L40S behind
    llm-d's gateway): ``Traffic request rate: 10.0`` and ``Maximum request concurrency: None``
    just above each report name its point; the result JSON each job printed after it is
    not a report and is passed over. The numbers are the JSON's, as rounded in the report."""
    points = _points("vllm_nerdalert_l40s_k8s_job_logs.txt")
    assert sorted(points) == ["point", "r10", "r30"]
    r10 = points["r10"]
    assert (r10.mode, r10.value, r10.requests, r10.duration_s) == ("rate", 10.0, 300, 36.03)
    assert r10.metrics["output_throughput"] == {"value": 2249.25}  # 2249.247363167692
    assert r10.metrics["ttft_ms"] == {"mean": 54.58, "median": 53.0, "p99": 89.77}
    assert points["point"].metrics["output_throughput"] == {"value": 11481.02}


def test_a_mark_after_a_value_and_a_report_cut_in_its_header_are_said():
    """vLLM pull request #31826's before/after paste as the thread store holds it: the
    author's ``<========`` after the median TTFT (refused as 'not a number' would lose a
    real report), and the second report cut right after its header."""
    (result,) = parse([D / "vllm_pr31826_annotated_cut.txt"], "vllm").serving
    (point,) = result.points
    assert (point.id, point.requests, point.failed) == ("c8", 1000, 0)
    assert point.metrics["ttft_ms"] == {"mean": 30.87, "median": 27.44, "p99": 97.69}
    assert result.notes == [
        "vllm_pr31826_annotated_cut.txt: line 19: '<========' after Median TTFT (ms): left out "
        "(not the tool's)",
        "vllm_pr31826_annotated_cut.txt: line 32: a report cut before its first figure, left out",
    ]


def test_a_report_trimmed_by_its_author_reads_what_it_kept():
    """Hy3-FP8 TP4 on 4×GB300 as vLLM's recipe shows it: no section rules, no token totals,
    no P99 ITL (the author kept 16 lines); the numbers it kept are the point's."""
    (point,) = _points("vllm_recipes_hy3_4xgb300_trimmed.txt").values()
    assert (point.id, point.requests, point.failed, point.duration_s) == ("c32", 160, 0, 175.37)
    assert point.metrics["ttft_ms"] == {"mean": 2352.29, "median": 505.64, "p99": 14538.85}
    assert point.metrics["itl_ms"] == {"mean": 36.26, "median": 24.09}
    assert point.metrics["output_throughput"] == {"value": 934.26}


def test_sglang_reports_on_mi300x_and_h200_as_the_cookbook_prints_them():
    """SGLang's cookbook, Gemma 4: gemma-4-31B-it on one MI300X (latency at concurrency 1,
    throughput at 100), gemma-4-E2B-it on one H200 (a text and an image run at concurrency
    1, told apart by their ``Backend:``), each report as the authors trimmed it (no rules)."""
    mi300x = _points("sglang_cookbook_gemma4_31b_1xmi300x.txt", "sglang")
    assert sorted(mi300x) == ["c1", "c100"]
    c100 = mi300x["c100"]
    assert (c100.requests, c100.duration_s) == (1000, 441.59)
    assert c100.metrics["output_throughput"] == {"value": 1156.85}
    assert c100.metrics["ttft_ms"] == {"mean": 819.22}
    assert mi300x["c1"].metrics["ttft_ms"] == {"mean": 152.35, "median": 169.66}
    h200 = _points("sglang_cookbook_gemma4_e2b_1xh200.txt", "sglang")
    assert sorted(h200) == ["c1-sglang", "c1-sglang-oai-chat", "c100"]
    assert h200["c1-sglang"].metrics["ttft_ms"] == {"mean": 50.19, "median": 54.22}
    assert h200["c1-sglang-oai-chat"].metrics["ttft_ms"] == {"mean": 109.59, "median": 112.62}


def test_a_full_sglang_0_5_7_sweep_on_mi300x():
    """SGLang 0.5.7's complete reports (every section, P95/Max ITL) for Ministral-3-14B TP1
    on an MI300X node at concurrency 1, 16 and 100 (SGLang's cookbook): three points."""
    points = _points("sglang_cookbook_ministral3_14b_1xmi300x_0.5.7.txt", "sglang")
    assert sorted(points) == ["c1", "c100", "c16"]
    c16 = points["c16"]
    assert (c16.requests, c16.duration_s, c16.failed) == (80, 31.2, None)
    assert c16.metrics["itl_ms"] == {
        "mean": 9.96,
        "median": 9.1,
        "p95": 9.87,
        "p99": 51.39,
        "max": 888.63,
    }
    assert c16.metrics["e2el_ms"] == {"mean": 5351.07, "median": 5626.45}
    assert points["c100"].metrics["output_throughput"] == {"value": 2846.91}
