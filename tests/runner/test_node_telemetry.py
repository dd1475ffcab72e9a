"""A cluster run's energy from its nodes' telemetry, made once the files are collected: each
point measured over every node's GPUs, its per-point file holding both nodes, the sweep
judged again from its own records (the verdicts it had, and the energy figures now)."""

from __future__ import annotations

import json

import pytest

from pocforge.bench.summary import Summary
from pocforge.cluster.clock import ClockReading
from pocforge.results.store import RunStore
from pocforge.runner.node_telemetry import CLOCK_FILE, serving_energy, training_energy
from pocforge.spec import load_poc
from pocforge.telemetry.parsers import GpuSample
from pocforge.telemetry.series import Meta, Series, SourceInfo
from tests.results.conftest import DATA

pytestmark = pytest.mark.process  # the store's provenance runs git

T0 = 1_764_590_400.0
POWER_W = 300.0


def two_nodes(start: float, end: float) -> list[Series]:
    """Two nodes of one GPU each at a constant power, sampled every second over the span."""
    out = []
    for host in ("h1", "h2"):
        series = Series()
        series.meta = Meta(
            host=host, interval_s=1.0, started_s=start, sources=[SourceInfo(name="amd-smi")]
        )
        t = start
        while t <= end:
            series.gpu.append(
                GpuSample(source="amd-smi", host=host, gpu=0, timestamp_s=t, power_w=POWER_W)
            )
            t += 1.0
        out.append(series)
    return out


@pytest.fixture
def cluster_run(tmp_path):
    """The demo on two one-GPU nodes, with a real sweep's output as its serving stage, each
    repeat given its window on the clock (3 s apart)."""
    spec = load_poc("demo")
    spec = spec.model_copy(
        update={"cluster": spec.cluster.model_copy(update={"nodes": 2, "gpus_per_node": 1})}
    )
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    for source in (DATA / "pocforge-sweep-a").iterdir():
        (sweep / source.name).write_bytes(source.read_bytes())
    summary = json.loads((sweep / "summary.json").read_text())
    t = T0
    for point in summary["points"]:
        for repeat in point["repeats"]:
            t += 3.0
            repeat["started_unix_s"] = t
            t += repeat["duration_s"]
    (sweep / "summary.json").write_text(json.dumps(summary))
    run = RunStore(tmp_path / "results").create(spec)
    with run.stage("serving") as stage:
        stage.add_tree(sweep, "chat")
    return spec, run, summary, t


def test_each_point_gets_the_energy_of_every_nodes_gpus_and_is_judged_again(cluster_run):
    spec, run, before, end = cluster_run
    said: list[str] = []
    serving_energy(spec, run, two_nodes(T0 - 5, end + 5), said.append)
    folder = run.path / "serving" / "chat"
    after = Summary.model_validate_json((folder / "summary.json").read_text())
    for old, point in zip(before["points"], after.points, strict=True):
        # the sweep's own verdicts, reproduced from its records
        assert [(v.slo, v.verdict) for v in point.verdicts] == [
            (v["slo"], v["verdict"]) for v in old["verdicts"]
        ]
        for r in point.repeats:
            tokens = round(r.metrics["output_throughput"] * r.duration_s)
            joules = 2 * POWER_W * r.duration_s  # two nodes' GPUs over the window
            assert r.metrics["avg_power_w"] == pytest.approx(2 * POWER_W)
            assert r.metrics["joules_per_token"] == pytest.approx(joules / tokens, rel=1e-6)
        assert "joules_per_token" in point.aggregate and "joules_per_token" in after.definitions
        series = Series.read(folder / point.telemetry_file)
        assert {s.host for s in series.gpu} == {"h1", "h2"}
        assert [w.repeat for w in series.windows] == [r.repeat for r in point.repeats]
    assert after.best_passing_point == before["best_passing_point"]
    manifest = json.loads((run.path / "run.json").read_text())
    assert "serving/chat/telemetry-c1.jsonl" in manifest["stages"]["serving"]["files"]
    assert any("energy of 4 points over the nodes" in line for line in said)


def test_no_recording_gives_every_point_a_note_and_no_figure(cluster_run):
    spec, run, _, _ = cluster_run
    serving_energy(spec, run, [], lambda _: None)
    after = Summary.model_validate_json(
        (run.path / "serving" / "chat" / "summary.json").read_text()
    )
    for point in after.points:
        assert "energy not measured: not sampled" in point.notes
        assert point.telemetry_file is None
        assert all("joules_per_token" not in r.metrics for r in point.repeats)


def test_a_node_that_stopped_recording_leaves_its_points_unmeasured(cluster_run):
    """h2's recorder died after the first point: the later points' windows are not covered
    by every GPU, so they have no energy (not a guess from h1 alone)."""
    spec, run, before, end = cluster_run
    h1, h2 = two_nodes(T0 - 5, end + 5)
    first_end = max(r["started_unix_s"] + r["duration_s"] for r in before["points"][0]["repeats"])
    h2.gpu = [s for s in h2.gpu if s.timestamp_s <= first_end + 1]
    serving_energy(spec, run, [h1, h2], lambda _: None)
    after = Summary.model_validate_json(
        (run.path / "serving" / "chat" / "summary.json").read_text()
    )
    assert all("joules_per_token" in r.metrics for r in after.points[0].repeats)
    last = after.points[-1]
    assert all("joules_per_token" not in r.metrics for r in last.repeats)
    assert any(n.startswith("energy not measured") for n in last.notes), last.notes


def test_training_gets_one_window_over_every_node(cluster_run, tmp_path):
    spec, run, _, _ = cluster_run
    with run.stage("training") as stage:
        stage.write_json("summary.json", {})
    said: list[str] = []
    training_energy(spec, run, two_nodes(T0, T0 + 60), T0 + 10, T0 + 40, said.append)
    series = Series.read(run.path / "training" / "telemetry.jsonl")
    (win,) = series.windows
    assert win.label == "training" and win.energy.energy_j == pytest.approx(2 * POWER_W * 30)
    assert "on 2 nodes" in said[-1]


def test_a_node_whose_clock_is_ahead_is_aligned_by_its_reading(cluster_run):
    """h2's clock reads 30 s ahead: its recorder stamped every sample 30 s late. Without a
    clock reading its samples miss the first points' windows (no energy rather than a
    guess); with the reading taken at each point's start, every window cuts both nodes'
    series at the same instant and has both nodes' energy."""
    spec, run, before, end = cluster_run
    h1, h2 = two_nodes(T0 - 5, end + 5)
    skewed = h2.shifted(-30.0)  # stamped on a clock 30 s ahead
    serving_energy(spec, run, [h1, skewed], lambda _: None)
    folder = run.path / "serving" / "chat"
    first = Summary.model_validate_json((folder / "summary.json").read_text()).points[0]
    assert all("joules_per_token" not in r.metrics for r in first.repeats)

    clock = run.path / CLOCK_FILE
    clock.parent.mkdir(parents=True, exist_ok=True)
    clock.write_text("".join(
        ClockReading(host=host, at_s=T0, offset_s=offset, rtt_s=0.002, label=p["id"])
        .model_dump_json() + "\n"
        for p in before["points"] for host, offset in (("h1", 0.0), ("h2", 30.0))
    ))  # fmt: skip
    said: list[str] = []
    serving_energy(spec, run, [h1, skewed], said.append)
    after = Summary.model_validate_json((folder / "summary.json").read_text())
    for point in after.points:
        for r in point.repeats:
            assert r.metrics["avg_power_w"] == pytest.approx(2 * POWER_W)
        series = Series.read(folder / point.telemetry_file)
        h2_times = sorted(s.timestamp_s for s in series.gpu if s.host == "h2")
        h1_times = sorted(s.timestamp_s for s in series.gpu if s.host == "h1")
        assert h2_times == pytest.approx(h1_times)  # the same instants, on this machine's clock
    assert CLOCK_FILE in json.loads((run.path / "run.json").read_text())["files"]  # kept
