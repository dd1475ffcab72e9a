"""Training telemetry on the dashboard: a run's power and utilisation beside its step times,
and the energy of the whole run and of its measured steps (J per training token), made by
the runner's own code from samples of a known power; nothing where nothing was recorded."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pocforge.report import render
from pocforge.results.stage_schema import TrainingResult, TrainingStep
from pocforge.runner.telemetry import training_windows
from pocforge.spec import load_poc
from pocforge.telemetry.host import HostSample
from pocforge.telemetry.parsers import GpuSample
from pocforge.telemetry.series import Meta, Series, SourceInfo
from pocforge.training.summary import StepRecord, TrainingSummary

pytestmark = pytest.mark.process  # the store's provenance runs git
DATA = Path(__file__).resolve().parents[1] / "data"

FIGURE = re.compile(r'<script type="application/json" id="fig-([^"]+)">(.*?)</script>', re.S)
SECTION = re.compile(r'<section class="page" id="training">(.*?)</section>', re.S)
T0 = 1_764_590_400.0
POWER_W, GPUS, TOKENS_PER_STEP = 300.0, 2, 4096
WARMUP, STEPS, STEP_S, STARTUP_S = 2, 10, 2.0, 6.0


def summary() -> TrainingSummary:
    """A real DeepSpeed summary (tests/data/training) stretched to ten 2 s steps after a 6 s
    start-up, two of them warm-up, each given the time it ended, as the kit's driver
    records it."""
    real = TrainingSummary.model_validate_json(
        (DATA / "training" / "deepspeed-summary-completed.json").read_text()
    )
    steps = [
        StepRecord(step=i, loss=8.0 - 0.1 * i, seconds=STEP_S,
                   ended_unix_s=T0 + STARTUP_S + STEP_S * (i + 1))
        for i in range(STEPS)
    ]  # fmt: skip
    return real.model_copy(
        update={"steps": STEPS, "warmup_steps": WARMUP, "world_size": GPUS,
                "tokens_per_step": TOKENS_PER_STEP, "loss_curve": steps}
    )  # fmt: skip


def series(end: float) -> Series:
    """Both GPUs of the node at POWER_W, busy while the steps run, sampled every second."""
    out = Series(
        meta=Meta(host="n1", interval_s=1.0, started_s=T0, sources=[SourceInfo(name="amd-smi")])
    )
    t = T0
    while t <= end + 2:
        busy = 90.0 if T0 + STARTUP_S <= t <= end else 3.0
        out.gpu += [GpuSample(source="amd-smi", host="n1", gpu=g, timestamp_s=t,
                              power_w=POWER_W, gfx_util_pct=busy) for g in range(GPUS)]  # fmt: skip
        out.host.append(HostSample(host="n1", timestamp_s=t, cpu_util_pct=10.0))
        t += 1.0
    return out


def test_windows_of_the_run_and_of_its_measured_steps():
    """The whole run (start-up included) and the eight measured steps: 2 GPUs at 300 W for
    16 s over 8 x 4096 tokens is 600 x 16 / 32768 J per training token."""
    end = T0 + STARTUP_S + STEP_S * STEPS
    said: list[str] = []
    run_win, steps_win = training_windows(
        series(end).gpu, [], T0, end + 1, summary(), interval_s=1.0, gpus=GPUS, say=said.append
    )
    assert run_win.label == "training" and run_win.energy.energy_j == pytest.approx(600 * 27)
    assert steps_win.label == "training steps"
    assert (steps_win.start_s, steps_win.end_s) == (T0 + 10, end)  # after the warm-up
    assert steps_win.output_tokens == (STEPS - WARMUP) * TOKENS_PER_STEP
    per_token = 600 * (STEP_S * (STEPS - WARMUP)) / ((STEPS - WARMUP) * TOKENS_PER_STEP)
    assert steps_win.energy.joules_per_output_token == pytest.approx(per_token)
    assert any("J per token" in line for line in said)
    no_times = summary().model_copy(
        update={
            "loss_curve": [
                s.model_copy(update={"ended_unix_s": None}) for s in summary().loss_curve
            ]
        }
    )
    assert len(training_windows(series(end).gpu, [], T0, end, no_times, interval_s=1.0,
                                gpus=GPUS, say=said.append)) == 1  # fmt: skip


def test_the_training_section_shows_power_beside_the_steps(tmp_path):
    from pocforge.results.adapters import from_training_summary
    from pocforge.results.store import RunStore

    end = T0 + STARTUP_S + STEP_S * STEPS
    recorded = series(end)
    recorded.windows = training_windows(recorded.gpu, [], T0, end + 1, summary(),
                                        interval_s=1.0, gpus=GPUS, say=lambda _: None)  # fmt: skip
    run = RunStore(tmp_path / "results").create(load_poc("demo"))
    with run.stage("training") as stage:
        stage.write_json(
            "result.json", json.loads(from_training_summary(summary()).model_dump_json())
        )
        recorded.write(run.path / "training" / "telemetry.jsonl")
    run.finish()
    page = render(run.path).read_text()
    (section,) = SECTION.findall(page)
    assert "J per training token" in section and "measured steps" in section
    figures = {chart: json.loads(text) for chart, text in FIGURE.findall(page)}
    traces = {t["name"]: t for t in figures["training-watts"]["data"]}
    assert set(traces["n1: GPUs"]["y"]) == {600.0}
    steps = traces["step time"]
    assert steps["y"] == [STEP_S] * STEPS
    assert steps["x"][0] == pytest.approx(STARTUP_S + STEP_S)  # seconds from the first sample
    assert steps["yaxis"] != traces["n1: GPUs"]["yaxis"]  # a row of its own
    assert TrainingResult.model_validate_json(
        (run.path / "training" / "result.json").read_text()
    ).steps[0] == TrainingStep(step=0, loss=8.0, step_time_s=STEP_S, tokens=TOKENS_PER_STEP,
                               ended_unix_s=T0 + STARTUP_S + STEP_S)  # fmt: skip


def test_no_training_telemetry_no_energy_table(tmp_path):
    from pocforge.results.adapters import from_training_summary
    from pocforge.results.store import RunStore

    run = RunStore(tmp_path / "results").create(load_poc("demo"))
    with run.stage("training") as stage:
        stage.write_json(
            "result.json", json.loads(from_training_summary(summary()).model_dump_json())
        )
    run.finish()
    page = render(run.path).read_text()
    (section,) = SECTION.findall(page)
    assert "J per training token" not in section and "fig-training-watts" not in page
