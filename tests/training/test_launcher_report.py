"""torchrun's failure report, read from real logs, and the training stage's judgement of
how its launcher ended: a rank that dies mid-run fails the stage naming the rank and
keeping the steps done; one that dies at exit after a complete summary is a warning."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pocforge.frameworks.process import LaunchError
from pocforge.training.launcher_report import LauncherReport, RankFailure, parse_launcher_report
from pocforge.training.run import judged
from pocforge.training.summary import TrainingSummary

DATA = Path(__file__).parent.parent / "data" / "training"


def test_a_rank_killed_mid_run_is_the_root_cause_and_the_launcher_stopped_the_rest():
    report = parse_launcher_report((DATA / "torchrun-rank1-sigkill.txt").read_text())
    first = report.first
    assert (first.rank, first.local_rank, first.host, first.exit_code) == (1, 1, "localhost", -9)
    assert first.signal_name == "SIGKILL" and first.time == "2026-12-02_01:07:42"
    assert [(o.rank, o.exit_code) for o in report.others] == [(0, -15)]
    assert report.line() == (
        "rank 1 (local rank 1 on localhost) was killed by SIGKILL at 2026-12-02_01:07:42; "
        "the launcher stopped the other 1 rank(s) (SIGTERM)"
    )


def test_a_killed_rank_is_blamed_over_the_peer_that_lost_it_in_the_same_poll():
    # torchrun stamps failures without an error file in whole seconds when it notices them,
    # and its root cause is the smallest stamp: a tie (or a second apart, one poll) names
    # the lower rank, here the peer whose collective failed (exit 1) after rank 1 died
    peer = RankFailure(0, 0, "node-a", 1, 2161, "2026-12-02_01:07:42")
    killed = RankFailure(1, 1, "node-a", -9, 2162, "2026-12-02_01:07:43")
    report = LauncherReport(root_cause=peer, others=[killed])
    assert report.first == killed
    assert report.line().startswith("rank 1 (local rank 1 on node-a) was killed by SIGKILL")
    assert report.line().endswith("1 other rank(s) ended too")
    # a failure well before the signal is its own root cause
    earlier = RankFailure(0, 0, "node-a", 1, 2161, "2026-12-02_01:07:30")
    assert LauncherReport(root_cause=earlier, others=[killed]).first == earlier


def test_an_older_report_without_signal_names_or_a_root_cause_entry():
    report = parse_launcher_report((DATA / "torchrun-sigabrt-vlmevalkit.txt").read_text())
    assert report.root_cause is None
    assert [(o.rank, o.signal_name) for o in report.others] == [
        (1, "SIGABRT"),
        (3, "SIGABRT"),
        (5, "SIGABRT"),
        (7, "SIGABRT"),
    ]
    assert report.line().startswith(
        "rank 1 (local rank 1 on ip-172-31-21-134.ec2.internal) was killed by SIGABRT"
    )
    assert report.line().endswith("3 other rank(s) ended too")


def test_a_log_without_a_report_has_none():
    assert (
        parse_launcher_report("step    0  loss   7.42\nTraceback (most recent call last):\n")
        is None
    )


@pytest.fixture
def stage(tmp_path) -> Path:
    shutil.copy(DATA / "deepspeed-summary-completed.json", tmp_path / "summary.json")
    return tmp_path


def test_a_rank_that_dies_after_a_complete_summary_is_a_warning_not_a_failure(stage):
    log = stage / "train.log"
    log.write_text(
        "step    5  loss   7.2\n" + (DATA / "torchrun-sigabrt-vlmevalkit.txt").read_text()
    )
    summary = TrainingSummary.model_validate_json((stage / "summary.json").read_text())
    result = judged(summary, 1, log, stage, summary.steps)
    assert result.status == "completed" and len(result.warnings) == 1
    assert "rank 1 (local rank 1" in result.warnings[0] and "SIGABRT" in result.warnings[0]
    kept = json.loads((stage / "summary.json").read_text())
    assert kept["warnings"] == result.warnings  # recorded in the run, not only said


def test_a_rank_that_dies_mid_run_fails_naming_it_and_the_steps_kept(stage):
    log = stage / "train.log"
    log.write_text(
        "".join(f"step {i:4d}  loss 7.0\n" for i in range(23))
        + (DATA / "torchrun-rank1-sigkill.txt").read_text()
    )
    (stage / "summary.json").unlink()
    (stage / "steps.jsonl").write_text(
        "".join(json.dumps({"step": i, "loss": 7.0, "seconds": 0.04}) + "\n" for i in range(23))
    )
    with pytest.raises(LaunchError) as failed:
        judged(None, 1, log, stage, 200)
    message = str(failed.value).splitlines()[0]
    assert message.startswith(
        "training failed: rank 1 (local rank 1 on localhost) was killed by SIGKILL"
    )
    assert "23 of 200 steps done, kept in steps.jsonl" in message
    assert "Traceback" not in str(failed.value)  # the launcher's report, not its traceback
    assert failed.value.exit_code == 1
