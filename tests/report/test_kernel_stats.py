"""The GPU profilers' kernel summaries, read from real captures (tests/data/profilers/, each
file's source in tests/data/README.md): Nsight Systems' ``cuda_gpu_kern_sum`` as text and as
CSV, rocprofv3's ``*_kernel_stats.csv`` and legacy rocprof's ``results.stats.csv``; and the
dashboard's Profiles section showing one beside a profiled point. Every figure the tests
expect is read from the files themselves."""

from __future__ import annotations

import csv
import re
import shutil
from pathlib import Path

import pytest

from pocforge.report import render
from pocforge.report.kernel_stats import (
    KernelStatsError,
    category,
    parse,
    read,
)
from pocforge.results.store import RunStore
from pocforge.spec import load_poc
from tests.report.conftest import DATA

CAPTURES = Path(__file__).resolve().parents[1] / "data" / "profilers"
NSYS_TEXT = CAPTURES / "nsys-cuda_gpu_kern_sum-nanomoe-2026.1.1.txt"
NSYS_CSV = CAPTURES / "nsys-cuda_gpu_kern_sum-csv-h200-vllm-moeresearch.csv"
ROCPROFV3 = sorted(CAPTURES.glob("rocprofv3-kernel_stats-*.csv"))
ROCPROF = sorted(CAPTURES.glob("rocprof-stats-results-*.csv"))


def csv_rows(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(path.open()))


def test_nsys_text_columns_come_from_the_rule_under_the_header():
    table = read(NSYS_TEXT)
    assert table is not None and table.tool == "nsys"
    lines = [line for line in NSYS_TEXT.read_text().splitlines() if re.match(r"\s+\d+\.\d\s", line)]
    assert len(table.kernels) == len(lines) == 17
    first = lines[0].split()
    top = table.kernels[0]
    assert (top.share, top.total_ns, top.calls, top.avg_ns) == (
        float(first[0]) / 100,
        float(first[1]),
        int(first[2]),
        float(first[3]),
    )
    # the name is the last column, cut by nsys with an ellipsis, kept as written
    assert top.name.startswith("void at::native::unrolled_elementwise_kernel<")
    assert top.name.endswith("…")
    assert "ampere_sgemm_64x32_sliced1x4_tn" in [k.name for k in table.kernels]
    assert sum(k.share for k in table.kernels) == pytest.approx(1.0, abs=0.01)


def test_nsys_csv_of_an_h200_vllm_moe_run_is_mostly_its_grouped_gemm():
    table = read(NSYS_CSV)
    rows = csv_rows(NSYS_CSV)
    assert table is not None and table.tool == "nsys" and len(table.kernels) == len(rows)
    top = table.kernels[0]
    assert top.total_ns == float(rows[0]["Total Time (ns)"])
    assert top.calls == int(rows[0]["Instances"])
    assert "GroupProblemShape" in top.name and top.category == "moe"
    shares = dict(table.by_category())
    # the file is the top 40 of 88 rows: the shares are the tool's, of all kernel time
    assert shares["moe"] > 0.8 and shares["attention"] > 0.01 and shares["gemm"] > 0.05
    kinds = {k.name.split("<")[0][:40]: k.category for k in table.kernels}
    assert kinds["nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT"] == "gemm"
    assert kinds["void cutlass::device_kernel"] in ("moe", "attention")
    flash = [k for k in table.kernels if "FlashAttnFwdSm90" in k.name]
    assert flash and {k.category for k in flash} == {"attention"}  # a CUTLASS kernel too
    assert {k.category for k in table.kernels if "rms_norm" in k.name} == {"norm_elementwise"}


@pytest.mark.parametrize("path", ROCPROFV3 + ROCPROF, ids=lambda p: p.name)
def test_rocprof_stats_read_with_the_tools_own_figures(path):
    table = read(path)
    rows = csv_rows(path)
    assert table is not None and len(table.kernels) == len(rows)
    assert table.tool == ("rocprofv3" if "MinNs" in rows[0] else "rocprof")
    by_name = {k.name: k for k in table.kernels}
    for row in rows:
        kernel = by_name[row["Name"]]
        assert kernel.calls == int(row["Calls"])
        assert kernel.total_ns == float(row["TotalDurationNs"])
        assert kernel.share == pytest.approx(float(row["Percentage"]) / 100)
    totals = [k.total_ns for k in table.kernels]
    assert totals == sorted(totals, reverse=True)


def test_a_pytorch_training_rank_on_rocm_spends_its_kernel_time_in_rccl():
    (path,) = [p for p in ROCPROFV3 if "pytorch" in p.name]
    table = read(path)
    assert table.kernels[0].name.startswith("rccl_main_kernel")
    assert table.by_category()[0][0] == "communication"
    assert {k.category for k in table.kernels if k.name.startswith("igemm_")} == {"gemm"}


@pytest.mark.parametrize(
    ("name", "where"),
    [
        ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "communication"),
        ("void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(...)", "communication"),
        ("fused_moe_kernel", "moe"),
        ("_ZN5aiter20fmoe_bf16_g1u1_silu_32x256E", "moe"),
        ("Cijk_Alik_Bljk_BBS_BH_MT256x256x64_MI32x32x8x1_SN_1LDSB0", "gemm"),
        ("void flashinfer::BatchPrefillWithPagedKVCacheKernel<...>", "attention"),
        ("kernel_unified_attention_2d", "attention"),
        ("_rms_norm_kernel", "norm_elementwise"),
        ("JacobiIterationKernel(int, double)", "other"),
    ],
)  # fmt: skip
def test_kernel_names_are_sorted_into_where_the_time_goes(name, where):
    assert category(name) == where


@pytest.mark.parametrize(
    "text",
    ["", "Name,Size\nfoo,1\n", "just some log line\n", '"Name","Calls","TotalDurationNs","AverageNs","Percentage"\n"k",x,1,1,1\n'],
)  # fmt: skip
def test_text_that_is_no_kernel_summary_is_refused(text, tmp_path):
    with pytest.raises(KernelStatsError):
        parse(text)
    (tmp_path / "x_kernel_stats.csv").write_text(text)
    assert read(tmp_path / "x_kernel_stats.csv") is None


@pytest.mark.process  # the store's provenance runs git
def test_the_profiles_section_shows_a_points_kernel_summary(tmp_path):
    store = RunStore(tmp_path / "results")
    profile = tmp_path / "profile-c2"
    profile.mkdir()
    stats = ROCPROFV3[0]
    shutil.copy(stats, profile / "12345_kernel_stats.csv")
    (profile / "broken_kernel_stats.csv").write_text("not a summary\n")
    run = store.create(load_poc("demo"))
    with run.stage("serving") as stage:
        stage.add_tree(DATA / "pocforge-sweep-a", "chat")
        stage.add_tree(profile, "chat/profile-c2")
    run.finish()
    page = render(run.path).read_text()
    (section,) = re.findall(r'<section class="page" id="profile-chat">(.*?)</section>', page, re.S)
    assert "GPU kernels by time, from rocprofv3" in section
    (table,) = re.findall(r'<table class="points profile-kernels">(.*?)</table>', section, re.S)
    rows = re.findall(r"<tr><td>(.*?)</tr>", table, re.S)
    expected = read(stats)
    assert len(rows) == len(expected.kernels)
    first = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td>(.*?)</td>", "<td>" + rows[0])]
    top = expected.kernels[0]
    assert first[0] == top.name.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    assert first[2] == str(top.calls) and first[5] == f"{100 * top.share:.1f}%"
    assert "No kernel summary could be read from this file." in section  # the broken one
