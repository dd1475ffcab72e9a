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
