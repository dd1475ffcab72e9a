"""A real sweep with the runner's telemetry hook: the sampler runs for each point on this
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
from pocforge.telemetry.sampler import HostSource
from pocforge.telemetry.series import Series

pytestmark = pytest.mark.process  # the scripted server is a process of its own


def test_each_point_is_sampled_over_its_repeats(instrument, tiny_dir, tmp_path):
    cfg = SweepConfig(
        base_url=instrument,
        model="instrument",
        tokenizer=str(tiny_dir),
        dataset=DatasetConfig(isl="8", osl="4"),
        values=[1, 2],
        num_prompts=12,
        repeats=2,
    )
    said: list[str] = []
    hook = ServingTelemetry(tmp_path, gpus=1, price=3.0, say=said.append, interval_s=0.2)
    summary = run_sweep(cfg, tmp_path, hook=hook)
    assert summary.status == "complete" and hook.sampler is None
    rapl = bool(HostSource().counters)
    for point in summary.points:
        series = Series.read(tmp_path / point.telemetry_file)
        assert series.meta.sources[0].name == "host" and series.end is not None
        assert [w.repeat for w in series.windows] == [0, 1]
        for r, w in zip(point.repeats, series.windows, strict=True):
            assert (w.start_s, w.end_s) == (r.started_unix_s, r.started_unix_s + r.duration_s)
            times = [s.timestamp_s for s in series.host]
            assert times[0] <= w.start_s and times[-1] >= w.end_s  # the sampler spans it
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
    assert sum("sampler" in line and "% of a core" in line for line in said) == 2
    data = json.loads((tmp_path / "summary.json").read_text())
    jsonschema.validate(data, json.loads((tmp_path / "summary.schema.json").read_text()))
