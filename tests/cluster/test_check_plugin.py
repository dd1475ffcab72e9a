"""pocforge_check: every operator's verdict and its one-line message."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    ("op", "measured", "threshold", "passed"),
    [
        ("eq", 8, 8, True),
        ("eq", "7", 8, False),
        ("ge", 400.0, 400, True),
        ("ge", 200, 400, False),
        ("le", 0, 0, True),
        ("le", 3, 0, False),
        ("in", "madvise", ["always", "madvise"], True),
        ("in", "never", ["always", "madvise"], False),
        ("all_in", ["performance"], ["performance"], True),
        ("all_in", ["performance", "powersave"], ["performance"], False),
        ("all_in", [], ["x"], False),
        ("contains", ["AMD Instinct MI300X"], "MI300X", True),
        ("contains", ["MI250X"], "MI300X", False),
        ("majority", "6.10.5", ["6.10.5", "6.10.5", "6.8.0"], True),
        ("majority", "6.8.0", ["6.10.5", "6.10.5", "6.8.0"], False),
        ("majority", None, [None, None], False),
    ],
)
def test_operators(check_plugin, op, measured, threshold, passed):
    assert check_plugin.evaluate(op, measured, threshold)[0] is passed


def test_messages_name_expected_and_found(check_plugin):
    rec = check_plugin.record({"check": "gpu_count", "measured": 7, "threshold": 8})
    assert (rec["status"], rec["message"]) == ("fail", "gpu_count: expected 8, found 7")
    rec = check_plugin.record(
        {
            "check": "gpu_driver_version",
            "op": "majority",
            "measured": "6.8",
            "threshold": ["6.10", "6.10", "6.8"],
        }
    )
    assert rec["message"] == "gpu_driver_version: expected 6.10 (as on 2 of 3 hosts), found 6.8"
    rec = check_plugin.record(
        {"check": "gpu_count", "measured": 0, "threshold": 8, "skip": "no GPU"}
    )
    assert (rec["status"], rec["message"]) == ("skip", "gpu_count: skipped: no GPU")


def test_unknown_operator_is_an_error(check_plugin):
    from ansible.errors import AnsibleActionFail

    with pytest.raises(AnsibleActionFail, match="unknown op 'gt'"):
        check_plugin.evaluate("gt", 1, 0)


def test_skip_is_first_class_with_its_reason(check_plugin):
    """A skipped check carries its reason as data (the health matrix and the dashboard keep
    it) and keeps what was measured; a note never hides a skip's reason."""
    rec = check_plugin.record(
        {
            "check": "gpu_kernel_log",
            "measured": None,
            "threshold": 0,
            "skip": "kernel log not readable: dmesg: read kernel buffer failed: Operation not "
            "permitted (not root, and kernel.dmesg_restrict=1)",
            "note": "ignored",
        }
    )
    assert rec["status"] == "skip"
    assert rec["reason"].endswith("(not root, and kernel.dmesg_restrict=1)")
    assert rec["message"] == f"gpu_kernel_log: skipped: {rec['reason']}"
    measured = check_plugin.record(
        {"check": "alltoall_intra_busbw", "measured": 361.41, "skip": "no busbw reference"}
    )
    assert (measured["status"], measured["measured"]) == ("skip", 361.41)


def test_note_is_appended_to_pass_and_fail_and_detail_to_fail(check_plugin):
    ok = check_plugin.record(
        {
            "check": "kernel_cmdline",
            "measured": ["iommu=pt"],
            "threshold": ["iommu=pt"],
            "note": "required by the MI300X guide",
            "detail": "missing ",
        }
    )
    assert ok["message"] == (
        "kernel_cmdline: [iommu=pt] (expected [iommu=pt]); required by the MI300X guide"
    )
    assert ok["reason"] == ""
    bad = check_plugin.record(
        {
            "check": "kernel_cmdline",
            "measured": [],
            "threshold": ["iommu=pt"],
            "note": "required by the MI300X guide",
            "detail": "missing iommu=pt",
        }
    )
    assert bad["message"] == (
        "kernel_cmdline: expected [iommu=pt], found [] (missing iommu=pt); "
        "required by the MI300X guide"
    )
