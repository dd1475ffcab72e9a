"""The collectives role's parser, against real published rccl-tests / nccl-tests outputs."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data" / "collectives"

# file -> (op, ranks, rows, peak busbw GB/s, size of the peak, avg busbw, hosts)
CASES = {
    "rccl_all_reduce_mi300x_1node_8gpu.txt": ("all_reduce", 8, 31, 315.91, 8589934592, 110.464, 1),
    "rccl_all_reduce_mi300x_2node_16gpu.txt": (
        "all_reduce",
        16,
        32,
        357.46,
        17179869184,
        92.3318,
        2,
    ),
    "rccl_alltoall_mi355x_1node_8gpu.txt": ("alltoall", 8, 2, 361.41, 17179869184, 236.187, 1),
    "nccl_all_reduce_h100_2node_16gpu.txt": ("all_reduce", 16, 31, 338.82, 8589934592, 70.742, 2),
    "nccl_all_gather_gb10_2node_2gpu.txt": ("all_gather", 2, 1, 22.98, 17179869184, 22.9611, 2),
    "nccl_alltoall_gb300_1node_4gpu.txt": ("alltoall", 4, 2, 680.7, 17179869184, 381.478, 1),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_parses_real_outputs(nccl_tests, name):
    """Every real output yields its rows, peak busbw, average and zero #wrong."""
    op, ranks, rows, peak, size, avg, hosts = CASES[name]
    parsed = nccl_tests.parse_nccl_tests((DATA / name).read_text(), op=f"{op}_perf")
    assert parsed["op"] == op
    assert (parsed["nranks"], len(parsed["rows"]), len(parsed["hosts"])) == (ranks, rows, hosts)
    assert parsed["peak_busbw"] == pytest.approx(peak)
    assert parsed["peak_busbw_size"] == size
    assert parsed["avg_busbw"] == pytest.approx(avg)
    assert parsed["wrong_total"] == 0 and parsed["out_of_bounds"] == 0


def test_alltoall_in_place_wrong_is_not_applicable(nccl_tests):
    """alltoall prints N/A for in-place #wrong: kept as None, not counted."""
    parsed = nccl_tests.parse_nccl_tests((DATA / "rccl_alltoall_mi355x_1node_8gpu.txt").read_text())
    assert [r["in_place"]["wrong"] for r in parsed["rows"]] == [None, None]
    assert [r["out_of_place"]["wrong"] for r in parsed["rows"]] == [0, 0]


def test_mpirun_tag_prefix_and_wrong_counts(nccl_tests):
    """--tag-output prefixes are stripped; a non-zero #wrong is summed and fails the check."""
    text = (DATA / "rccl_all_reduce_mi300x_1node_8gpu.txt").read_text()
    lines = [f"[1,0]<stdout>:{line}" for line in text.splitlines()]
    last = lines[-5].rsplit("0", 1)
    lines[-5] = last[0] + "3" + last[1]  # the in-place #wrong of the last row: 0 -> 3
    parsed = nccl_tests.parse_nccl_tests("\n".join(lines), op="all_reduce_perf")
    assert parsed["wrong_total"] == 3 and len(parsed["rows"]) == 31
    checks = nccl_tests.collective_checks(parsed, reference=315.9, fraction=0.95)
    assert [(c["check"], c["measured"], c["threshold"]) for c in checks] == [
        ("all_reduce_intra_busbw", 315.91, 300.1),
        ("all_reduce_intra_wrong", 3, 0),
    ]


def test_busbw_against_reference(nccl_tests, check_plugin):
    """95% of the reference passes at 315.9 and fails at 340; no reference is a skip."""
    parsed = nccl_tests.parse_nccl_tests(
        (DATA / "rccl_all_reduce_mi300x_1node_8gpu.txt").read_text(), op="all_reduce"
    )
    ok = nccl_tests.collective_checks(parsed, 315.9)[0]
    assert check_plugin.record(ok)["status"] == "pass"
    low = check_plugin.record(nccl_tests.collective_checks(parsed, 340.0)[0])
    assert low["status"] == "fail"
    assert low["message"].startswith("all_reduce_intra_busbw: expected >= 323 GB/s, found 315.91")
    none = check_plugin.record(nccl_tests.collective_checks(parsed, None, platform="MI300X")[0])
    assert none["status"] == "skip" and "no busbw reference for MI300X" in none["message"]


def test_failed_run_is_a_failed_check(nccl_tests, check_plugin):
    """A run that exited non-zero becomes a failed '<op>_intra_run' check with its error."""
    checks = nccl_tests.loop_checks([{"item": "alltoall", "rc": 1, "stderr": "hipErrorNoDevice"}])
    rec = check_plugin.record(checks[0])
    assert rec["check"] == "alltoall_intra_run" and rec["status"] == "fail"
    assert "hipErrorNoDevice" in rec["message"]
