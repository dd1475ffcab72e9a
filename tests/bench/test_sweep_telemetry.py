"""A real sweep with the runner's telemetry hook: the recorder runs for each point on this
machine, each repeat's window is in its series, and the energy figures (or why there are
none) land in the summary the verdicts and the dashboard read."""

from __future__ import annotations

import json

import jsonschema
import pytest

from pocforge.bench.config import SweepConfig
from pocforge.bench.datasets import DatasetConfig
from pocforge.bench.sweep import run_sweep
from pocforge.runner.telemetry import ServingTelemetry
from pocforge.telemetry.recorder import POWERCAP, rapl_packages
from pocforge.telemetry.series import Series

pytestmark = pytest.mark.process  # the scripted server is a process of its own


def two_points(instrument: str, tiny_dir, num_prompts: int, **more) -> SweepConfig:
    """c1 and c2 against the scripted server, two repeats each."""
    return SweepConfig(
        base_url=instrument,
        model="instrument",
        tokenizer=str(tiny_dir),
        dataset=DatasetConfig(isl="8", osl="4"),
        values=[1, 2],
        num_prompts=num_prompts,
        repeats=2,
        **more,
    )


def test_each_point_is_sampled_over_its_repeats(instrument, tiny_dir, tmp_path):
    cfg = two_points(instrument, tiny_dir, num_prompts=12)
    said: list[str] = []
    hook = ServingTelemetry(tmp_path, gpus=1, price=3.0, say=said.append, interval_s=0.2)
    summary = run_sweep(cfg, tmp_path, hook=hook)
    assert summary.status == "complete" and hook.recording is None
    rapl = bool(rapl_packages(POWERCAP)[0])
    for point in summary.points:
        series = Series.read(tmp_path / point.telemetry_file)
        assert series.meta.sources[0].name == "host" and series.end is not None
        assert [w.repeat for w in series.windows] == [0, 1]
        for r, w in zip(point.repeats, series.windows, strict=True):
            assert (w.start_s, w.end_s) == (r.started_unix_s, r.started_unix_s + r.duration_s)
            times = [s.timestamp_s for s in series.host]
            assert times[0] <= w.start_s and times[-1] >= w.end_s  # the recording spans it
            assert w.output_tokens == round(r.metrics["output_throughput"] * r.duration_s)
        assert "usd_per_million_tokens" in point.aggregate  # a price is all it needs
        if rapl:
            assert "joules_per_token" in point.aggregate
        else:  # this machine: no GPU tool, no powercap
            assert "joules_per_token" not in point.aggregate
            assert point.notes == [
                "energy not measured: no power source on the node (no GPU tool, no readable RAPL)"
            ]
    assert "usd_per_million_tokens" in summary.definitions
    assert sum("recorder" in line and "% of a core" in line for line in said) == 2
    data = json.loads((tmp_path / "summary.json").read_text())
    jsonschema.validate(data, json.loads((tmp_path / "summary.schema.json").read_text()))


def test_a_profiled_point_runs_one_more_pass_left_out_of_its_statistics(
    instrument, tiny_dir, tmp_path
):
    """A hook that profiles c2: the point's repeats are measured first, then one more pass
    runs between before_profile and after_profile, inside the telemetry's window of the
    point but in none of its repeats'; its requests go to a file of their own and the
    point's statistics hold only its repeats'; c1 gets no pass."""
    from pocforge.bench.records import read_records
    from pocforge.bench.sweep import Hooks, PointHook

    calls: list[tuple] = []

    class Profiler(PointHook):
        def profiles(self, point):
            return point.id == "c2"

        def before_profile(self, point):
            calls.append(("start", point.id, len(point.repeats)))

        def after_profile(self, point, interrupted):
            records = tmp_path / f"requests-{point.id}.profiled.jsonl"
            calls.append(("stop", point.id, interrupted, len(read_records(records))))

        def after(self, point):
            calls.append(("after", point.id))

    cfg = two_points(instrument, tiny_dir, num_prompts=6)
    telemetry = ServingTelemetry(tmp_path, gpus=1, price=3.0, say=lambda _: None, interval_s=0.2)
    summary = run_sweep(cfg, tmp_path, hook=Hooks(telemetry, Profiler()))
    assert calls == [("after", "c1"), ("start", "c2", 2), ("stop", "c2", False, 6), ("after", "c2")]
    c1, c2 = summary.points
    assert not (tmp_path / "requests-c1.profiled.jsonl").exists()
    assert len(read_records(tmp_path / "requests-c2.jsonl")) == 12  # its 2 repeats only
    assert [r.completed for r in c2.repeats] == [6, 6]
    assert any(n.startswith("profiled in one more repeat") for n in c2.notes)
    assert not any(n.startswith("profiled") for n in c1.notes)
    series = Series.read(tmp_path / c2.telemetry_file)
    assert [w.repeat for w in series.windows] == [0, 1]


def test_a_profiled_pass_of_so_many_requests_sends_only_those(instrument, tiny_dir, tmp_path):
    """``profile.requests``: the pass sends that many requests at the point's load, with no
    warm-up and no time limit, while the repeats keep the point's own duration."""
    from pocforge.bench.records import read_records
    from pocforge.bench.sweep import PointHook

    class Profiler(PointHook):
        def profiles(self, point):
            return point.id == "c2"

    cfg = two_points(
        instrument, tiny_dir, num_prompts=6, duration_s=1, warmup=2, profile_requests=3
    )
    summary = run_sweep(cfg, tmp_path, hook=Profiler())
    c2 = summary.points[1]
    assert all(r.completed > 3 for r in c2.repeats)  # a second each (duration_s), not 3
    assert len(read_records(tmp_path / "requests-c2.profiled.jsonl")) == 3
    assert any(n.startswith("profiled in one more pass of 3 requests") for n in c2.notes)
