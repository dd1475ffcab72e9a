"""The DeepEP / MoRI all-to-all importer on real printed output (tests/data/ep/, sources in
tests/data/README.md): every benchmark and print format read, the tools' best and worst
picked as the verdict metrics say, garbage refused with one line naming the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pocforge.results.ep_schema import EpAllToAllResult
from pocforge.results.importers import ResultImportError, import_files, parse
from pocforge.results.importers.deepep import parse_text
from pocforge.results.schema import load_document
from pocforge.results.verify import verify

EP = Path(__file__).resolve().parents[1] / "data" / "ep"


def _read(name: str) -> EpAllToAllResult:
    return parse_text((EP / name).read_text(encoding="utf-8"), name)


def test_intranode_sweeps_take_their_best_lines_phase() -> None:
    """P5en (8x H200) test_intranode.py: 16 chunks + default per sweep, each sweep's rows get
    the phase and precision of the Best line that ends it; the default config is kept but
    flagged, and the verdict is the Best lines' numbers."""
    r = _read("deepep_intranode_h200_p5en_8gpu.txt")
    assert (r.tool, r.benchmark, r.collective) == (
        "deepep",
        "deepep-intranode",
        "ep_alltoall-deepep-intranode",
    )
    assert r.problem == {"num_tokens": 4096, "hidden": 7168, "num_topk": 8}
    assert len(r.rows) == 52 and not r.notes
    fp8 = [row for row in r.rows if row.phase == "dispatch" and row.precision == "fp8"]
    assert len(fp8) == 17 and fp8[0].gbs == {"nvl": 294.24} and fp8[0].time_us == 544.47
    default = fp8[15]
    assert (
        default.config.default and default.config.nvl_chunk is None and default.gbs["nvl"] == 319.82
    )
    best = fp8[16]
    assert (best.summary, best.config.sms, best.config.nvl_chunk, best.time_us) == (
        "best",
        24,
        6,
        499.58,
    )
    combine = [row for row in r.rows if row.phase == "combine"]
    assert (
        len(combine) == 18 and combine[0].config.nvl_chunk == 1 and combine[0].gbs["nvl"] == 159.88
    )
    assert r.verdict_metrics() == {
        "ep_dispatch.nvl_gbs": 331.77,
        "ep_dispatch.latency_us": 499.58,
        "ep_dispatch_fp8.nvl_gbs": 320.68,
        "ep_dispatch_fp8.latency_us": 499.58,
        "ep_dispatch_bf16.nvl_gbs": 331.77,
        "ep_dispatch_bf16.latency_us": 936.5,
        "ep_combine.nvl_gbs": 321.89,
        "ep_combine.latency_us": 965.24,
    }  # fmt: skip


def test_internode_log_with_nvshmem_noise() -> None:
    """A raw 2x8-GPU RoCE test_internode.py log (NVSHMEM debug lines interleaved): 11x8 FP8
    and BF16 dispatch configs and 7x6 combine configs, the `N + T us` notify + transmit
    times; RDMA and NVL GB/s of the Best lines."""
    r = _read("deepep_internode_2node_16gpu_roce.txt")
    assert r.benchmark == "deepep-internode"
    assert r.problem == {"num_tokens": 4096, "hidden": 7168, "num_topk_groups": 2, "num_topk": 8}
    by = {(p, q): [row for row in r.rows if (row.phase, row.precision) == (p, q)] for p, q in
          (("dispatch", "fp8"), ("dispatch", "bf16"), ("combine", None))}  # fmt: skip
    assert [len(v) for v in by.values()] == [89, 89, 43]
    first = by[("dispatch", "fp8")][0]
    assert (first.config.nvl_chunk, first.config.rdma_chunk) == (4, 4)
    assert (first.notify_us, first.time_us, first.gbs) == (
        284.0,
        1031.0,
        {"rdma": 58.55, "nvl": 191.1},
    )
    best_combine = by[("combine", None)][-1]
    assert best_combine.summary == "best" and best_combine.config.rdma_chunk == 24
    assert (best_combine.notify_us, best_combine.time_us) == (89.64, 1813.0)
    v = r.verdict_metrics()
    assert (v["ep_dispatch.rdma_gbs"], v["ep_dispatch.nvl_gbs"]) == (83.09, 271.19)
    assert (v["ep_dispatch_fp8.rdma_gbs"], v["ep_dispatch.latency_us"]) == (80.01, 754.0)
    assert (v["ep_combine.rdma_gbs"], v["ep_combine.nvl_gbs"], v["ep_combine.latency_us"]) == (
        64.57,
        210.76,
        1813.0,
    )


def test_internode_best_lines_only_in_the_first_format() -> None:
    """DeepEP's first print format (no times), 2x8 H100 with 4 IB per node: the three Best
    lines alone, a network far below the README's 43 GB/s."""
    r = _read("deepep_internode_h100_2node_4ib.txt")
    assert all(row.summary == "best" and row.time_us is None for row in r.rows)
    assert r.rows[0].config.model_dump(exclude_defaults=True) == {
        "sms": 24,
        "nvl_chunk": 20,
        "rdma_chunk": 32,
    }
    v = r.verdict_metrics()
    assert v["ep_dispatch_fp8.rdma_gbs"] == 4.47 and v["ep_dispatch.rdma_gbs"] == 4.72
    assert v["ep_combine.nvl_gbs"] == 9.50 and "ep_combine.latency_us" not in v


def test_low_latency_takes_the_worst_rank() -> None:
    """test_low_latency.py, one node of two: every rank prints its own lines; the verdict is
    the slowest rank (an all-to-all ends with it), each rank's number being its only one."""
    r = _read("deepep_low_latency_2node_node1_8gpu.txt")
    assert (r.benchmark, r.ranks) == ("deepep-low-latency", 8)
    both = [row for row in r.rows if row.phase == "dispatch+combine"]
    rank6 = next(row for row in both if row.rank == 6)
    assert (rank6.gbs, rank6.time_us, rank6.min_us, rank6.max_us) == (
        {"total": 12.5},
        1764.07,
        1414.72,
        2055.01,
    )
    assert r.verdict_metrics() == {
        "ep_dispatch_combine.total_gbs": 12.38,  # rank 0
        "ep_dispatch_combine.latency_us": 1780.92,  # rank 0
        "ep_dispatch.total_gbs": 10.40,  # rank 7
        "ep_dispatch.latency_us": 722.32,  # rank 7
        "ep_combine.total_gbs": 11.30,  # rank 1
        "ep_combine.latency_us": 1287.00,  # rank 1
    }


def test_low_latency_send_recv_times() -> None:
    """The receive-hook lines (`S + R us`): send and receive kernel times, no bandwidth."""
    r = _read("deepep_low_latency_8gpu_send_recv.txt")
    assert r.ranks == 7 and len(r.rows) == 14 and r.verdict_metrics() == {}
    rank7 = [row for row in r.rows if row.rank == 7]
    assert [(row.phase, row.send_us, row.recv_us) for row in rank7] == [
        ("dispatch", 35.38, 36.78),
        ("combine", 39.66, 10.14),
    ]


def test_mori_intranode_rounds() -> None:
    """MoRI bench_dispatch_combine.py on 8x MI355X: ten rounds a phase, each the rank-mean
    latency and bandwidth MoRI prints ('lat L bw X / LL'); the best round decides."""
    r = _read("mori_intranode_mi355x_8gpu.txt")
    assert (r.tool, r.benchmark, r.ranks) == ("mori", "mori-intranode", 8)
    dispatch = [row for row in r.rows if row.phase == "dispatch"]
    assert len(dispatch) == 10 and dispatch[0].config.block_num == 80
    assert (dispatch[0].config.warp_per_block, dispatch[0].gbs) == (
        16,
        {"xgmi": 366.42, "ll": 553.46},
    )
    combine = [row for row in r.rows if row.phase == "combine"]
    assert combine[0].config.warp_per_block == 4 and combine[0].time_us == 808.8
    v = r.verdict_metrics()
    assert (v["ep_dispatch.xgmi_gbs"], v["ep_dispatch.ll_gbs"], v["ep_dispatch.latency_us"]) == (
        368.67,
        556.87,
        842.7,
    )  # round 3
    assert (v["ep_combine.xgmi_gbs"], v["ep_combine.latency_us"]) == (384.51, 807.9)  # round 6
    # e2e: per-rank lists only; round 4's mean over ranks is the fastest
    assert v["ep_dispatch_combine.latency_us"] == pytest.approx(1632.975, abs=0.01)


def test_mori_internode_tables() -> None:
    """MoRI test_dispatch_combine_internode.py, 2 nodes of MI355X with AINICs: Best / Worst /
    Average rows per phase; only Best is a verdict candidate."""
    r = _read("mori_internode_mi355x_2node.txt")
    assert (r.benchmark, len(r.rows)) == ("mori-internode", 6)
    worst = next(row for row in r.rows if row.phase == "combine" and row.summary == "worst")
    assert (worst.precision, worst.gbs, worst.time_us) == (
        "bf16",
        {"rdma": 64.53, "xgmi": 210.95, "ll": 261.58},
        1813.62,
    )
    v = r.verdict_metrics()
    assert (v["ep_dispatch.rdma_gbs"], v["ep_dispatch.xgmi_gbs"], v["ep_dispatch.latency_us"]) == (
        76.1,
        248.88,
        1538.06,
    )
    assert v["ep_combine_bf16.rdma_gbs"] == 77.4 and v["ep_combine.ll_gbs"] == 314.74


def test_garbage_is_one_clear_line(tmp_path: Path) -> None:
    junk = tmp_path / "notes.txt"
    junk.write_text("NCCL INFO Bootstrap: Using eth0\n[testing] Running with BF16 ... passed\n")
    with pytest.raises(ResultImportError, match=r"^notes\.txt: no DeepEP or MoRI") as info:
        parse([junk], "deepep")
    assert "\n" not in str(info.value)


def test_two_benchmarks_in_one_file_are_refused(tmp_path: Path) -> None:
    mixed = tmp_path / "mixed.txt"
    mixed.write_text(
        (EP / "deepep_internode_h100_2node_4ib.txt").read_text()
        + (EP / "deepep_low_latency_8gpu_send_recv.txt").read_text()
    )
    with pytest.raises(ResultImportError, match="deepep-internode and deepep-low-latency"):
        parse_text(mixed.read_text(), mixed.name)


@pytest.mark.process
def test_import_writes_one_collective_file_per_benchmark(store) -> None:
    """Through import_files: collectives/ep_alltoall-<benchmark>.json per input, reading back
    as EpAllToAllResult with the same verdict metrics; inputs kept, manifest verifies."""
    files = [EP / "deepep_intranode_h200_p5en_8gpu.txt", EP / "mori_internode_mi355x_2node.txt"]
    run = import_files(files, "mori", store=store, as_ref="demo/ep")
    folder = run.path / "collectives"
    assert sorted(p.name for p in folder.iterdir()) == [
        "ep_alltoall-deepep-intranode.json",
        "ep_alltoall-mori-internode.json",
    ]
    back = load_document(folder / "ep_alltoall-deepep-intranode.json", EpAllToAllResult)
    assert back.verdict_metrics()["ep_combine.nvl_gbs"] == 321.89
    doc = json.loads((folder / "ep_alltoall-mori-internode.json").read_text())
    assert (doc["kind"], doc["tool"], doc["source_file"]) == (
        "pocforge-ep-alltoall",
        "mori",
        "mori_internode_mi355x_2node.txt",
    )
    assert verify(run.path).ok and run.manifest.imported_from.tool == "deepep"
    assert (run.path / "imported" / files[1].name).read_bytes() == files[1].read_bytes()


def test_sweep_cut_off_before_its_best_line_is_left_out_with_a_note() -> None:
    """A run killed during the combine sweep (the P5en capture without its last line): the
    17 combine lines cannot be told from a dispatch sweep, so they are dropped and said."""
    text = (EP / "deepep_intranode_h200_p5en_8gpu.txt").read_text().splitlines()
    assert text[-1].startswith("[tuning] Best combine")
    r = parse_text("\n".join(text[:-1]), "cut.txt")
    assert len(r.rows) == 34 and {row.phase for row in r.rows} == {"dispatch"}
    assert r.notes == [
        "17 [tuning] lines after the last Best line left out: the benchmark names a sweep's "
        "phase only in the Best line that ends it"
    ]
