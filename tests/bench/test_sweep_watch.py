"""A sweep's ``stop_when`` watchdog (a cluster run's node probe) stops it with its reason."""

from __future__ import annotations

import pytest

from pocforge.bench.config import SweepConfig
from pocforge.bench.datasets import DatasetConfig
from pocforge.bench.sweep import run_sweep

pytestmark = pytest.mark.process  # the scripted server is a process of its own


def test_a_reason_from_the_watchdog_stops_the_sweep_and_is_recorded(instrument, tiny_dir, tmp_path):
    """The probe says a node is gone on its second call: the sweep ends interrupted at once
    (far fewer than its 2000 requests), with the probe's reason in the summary."""
    calls: list[int] = []

    def probe() -> str | None:
        calls.append(1)
        return "h2 (198.51.100.12) does not answer on SSH port 22" if len(calls) > 1 else None

    cfg = SweepConfig(
        base_url=instrument,
        model="instrument",
        tokenizer=str(tiny_dir),
        dataset=DatasetConfig(isl="8", osl="4"),
        values=[2],
        num_prompts=2000,
    )
    summary = run_sweep(cfg, tmp_path, stop_when=probe)
    assert summary.status == "interrupted"
    assert summary.stopped_because == "h2 (198.51.100.12) does not answer on SSH port 22"
    (point,) = summary.points
    assert sum(r.requests_sent for r in point.repeats) < 2000


def test_a_quiet_watchdog_changes_nothing(instrument, tiny_dir, tmp_path):
    cfg = SweepConfig(
        base_url=instrument,
        model="instrument",
        tokenizer=str(tiny_dir),
        dataset=DatasetConfig(isl="8", osl="2"),
        values=[2],
        num_prompts=6,
    )
    summary = run_sweep(cfg, tmp_path, stop_when=lambda: None)
    assert summary.status == "complete" and summary.stopped_because is None
