"""A series: a measured window's energy over what was recorded (covered, cut, incomplete,
GPUs over CPU packages), and a file cut by a killed writer read back."""

from __future__ import annotations

import json

import pytest

from pocforge.telemetry.host import HostSample, PackageSample
from pocforge.telemetry.parsers import GpuSample
from pocforge.telemetry.series import Series, window

T = 1_764_590_400.0


def gpu_series(times, power=None, energy=None, gpu=0):
    return [
        GpuSample(
            source="amd-smi",
            host="n",
            gpu=gpu,
            timestamp_s=t,
            power_w=power,
            energy_j=None if energy is None else energy * (t - T),
        )  # fmt: skip
        for t in times
    ]


def test_window_prefers_the_counter_even_from_separate_category_samples():
    """amd-smi's power and energy categories arrive as separate samples of one GPU: the
    counter samples decide (400 W for 5 s = 2000 J), the power samples (300 W) are unused."""
    times = [T + i for i in range(-1, 8)]
    samples = gpu_series(times, power=300.0) + gpu_series([t + 0.3 for t in times], energy=400.0)
    win = window(samples, [], T, T + 5, interval_s=1.0, output_tokens=1000, gpu_count=1)
    assert win.energy.valid and win.energy.per_gpu[0].method == "counter"
    assert win.energy.energy_j == pytest.approx(2000.0)
    assert win.energy.joules_per_output_token == pytest.approx(2.0)
    assert win.energy.output_tokens_per_s_per_kw == pytest.approx(200 / 0.4)


def test_a_window_the_samples_do_not_cover_is_invalid_not_guessed():
    """The sampler died 2 s into a 5 s window: no figures, and the reason."""
    samples = gpu_series([T + i for i in range(-1, 3)], power=300.0)
    win = window(samples, [], T, T + 5, interval_s=1.0, output_tokens=1000, gpu_count=1)
    assert not win.energy.valid and win.energy.energy_j is None
    assert "last sample" in win.problem and "before the window end" in win.problem


def test_telemetry_for_fewer_gpus_than_serve_is_invalid():
    samples = gpu_series([T + i for i in range(-1, 7)], power=300.0)
    win = window(samples, [], T, T + 5, interval_s=1.0, output_tokens=1000, gpu_count=2)
    assert not win.energy.valid and "telemetry for 1 of 2 GPUs" in win.problem


def test_gpus_win_over_cpu_packages_and_no_power_is_said():
    """A GPU node's energy is its GPUs' (RAPL is recorded, not added); a GPU tool that
    reports no power ([N/A], GB10) gives no figures."""
    times = [T + i for i in range(-1, 7)]
    packages = [PackageSample(host="n", package=0, timestamp_s=t, energy_j=50.0 * (t - T + 1))
                for t in times]  # fmt: skip
    win = window(gpu_series(times, 200.0), packages, T, T + 5, interval_s=1.0,
                 output_tokens=10, gpu_count=1)  # fmt: skip
    assert win.devices == "gpu" and win.energy.avg_power_w == pytest.approx(200.0)
    win = window(gpu_series(times), packages, T, T + 5, interval_s=1.0, output_tokens=10,
                 gpu_count=1)  # fmt: skip
    assert not win.energy.valid and "no power readings" in win.problem


def test_series_skips_a_cut_last_line(tmp_path):
    path = tmp_path / "t.jsonl"
    sample = HostSample(host="n", timestamp_s=T, cpu_util_pct=3.0)
    path.write_text(json.dumps({"kind": "host", **sample.model_dump()}) + '\n{"kind": "gp')
    series = Series.read(path)
    assert series.host == [sample] and series.unreadable == 1
