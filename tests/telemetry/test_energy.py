"""Energy over a point's window: the integration, the counter, coverage, and the per-point
figures. Series here are synthetic on purpose: each test states the physics it checks."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pocforge.telemetry.energy import (
    EnergyEstimate,
    integrate,
    point_energy,
    window_energy,
)
from pocforge.telemetry.parsers import GpuSample


def series(times, powers=None, energies=None, *, host="h1", gpu=0) -> list[GpuSample]:
    """One GPU's samples at ``times`` with optional power (W) and counter (J) readings."""
    powers = powers if powers is not None else [None] * len(times)
    energies = energies if energies is not None else [None] * len(times)
    return [
        GpuSample(source="amd-smi", host=host, gpu=gpu, timestamp_s=t, power_w=p, energy_j=e)
        for t, p, e in zip(times, powers, energies, strict=True)
    ]


def regular(start, end, dt, jitter=()):
    """Sample times every ``dt`` from before ``start`` to after ``end``, each nudged by the
    matching fraction of ``dt`` in ``jitter`` (|j| < 0.4 keeps every gap under 1.8 dt)."""
    n = int((end - start) / dt) + 4
    return [start - dt + i * dt + (jitter[i] if i < len(jitter) else 0.0) * dt for i in range(n)]


# --- property tests -----------------------------------------------------------------------

finite = {"allow_nan": False, "allow_infinity": False}


@settings(max_examples=200, deadline=None)
@given(
    power=st.floats(0, 2000, **finite),
    start=st.floats(-1e6, 1e9, **finite),
    duration=st.floats(0.5, 3600, **finite),
    dt=st.floats(0.05, 5, **finite),
    phase=st.floats(0, 1, **finite),
)
def test_constant_power_integrates_to_power_times_duration(power, start, duration, dt, phase):
    """P watts held for T seconds is P·T joules, whatever the sampling grid's phase."""
    assume(duration / dt <= 5000)  # an hour at 50 ms is 72,000 samples: 15 s of the suite
    end = start + duration
    times = [t + phase * dt for t in regular(start, end, dt)]
    est = window_energy(series(times, [power] * len(times)), start, end, interval_s=dt)
    assert est.valid and est.method == "power"
    # end - start, not duration: at Unix-time magnitudes the window is what the floats hold
    assert est.energy_j == pytest.approx(power * (end - start), rel=1e-9, abs=1e-6)
    assert est.avg_power_w == pytest.approx(power, rel=1e-9, abs=1e-9)


@settings(max_examples=200, deadline=None)
@given(
    data=st.data(),
    dt=st.floats(0.1, 2, **finite),
    duration=st.floats(1, 120, **finite),
    cut=st.floats(0.01, 0.99, **finite),
)
def test_splitting_a_window_adds_up(data, dt, duration, cut):
    """E[a, c] = E[a, b] + E[b, c] for any b inside: one interpolant, integrated piecewise."""
    n = int(duration / dt) + 4
    jitter = data.draw(st.lists(st.floats(-0.39, 0.39, **finite), min_size=n, max_size=n))
    times = regular(0.0, duration, dt, jitter)
    powers = data.draw(st.lists(st.floats(0, 1500, **finite), min_size=n, max_size=n))
    samples = series(times, powers)
    mid = cut * duration
    whole = window_energy(samples, 0.0, duration, interval_s=dt)
    left = window_energy(samples, 0.0, mid, interval_s=dt)
    right = window_energy(samples, mid, duration, interval_s=dt)
    assert whole.valid and left.valid and right.valid
    assert left.energy_j + right.energy_j == pytest.approx(whole.energy_j, rel=1e-9, abs=1e-6)


@settings(max_examples=200, deadline=None)
@given(
    data=st.data(),
    power=st.floats(1, 1000, **finite),
    offset=st.floats(0, 1e8, **finite),
    dt=st.floats(0.1, 2, **finite),
    duration=st.floats(1, 600, **finite),
)
def test_counter_and_power_agree_on_a_linear_counter(data, power, offset, dt, duration):
    """A counter rising at P J/s (any origin) and power readings of P W give the same energy:
    the counter path and the power path are two readings of one quantity."""
    n = int(duration / dt) + 4
    jitter = data.draw(st.lists(st.floats(-0.39, 0.39, **finite), min_size=n, max_size=n))
    times = regular(0.0, duration, dt, jitter)
    counter = [offset + power * (t - times[0]) for t in times]
    by_counter = window_energy(series(times, [power] * n, counter), 0.0, duration, interval_s=dt)
    by_power = window_energy(series(times, [power] * n), 0.0, duration, interval_s=dt)
    assert (by_counter.method, by_power.method) == ("counter", "power")
    assert by_counter.energy_j == pytest.approx(by_power.energy_j, rel=1e-6, abs=1e-6)
    assert by_counter.energy_j == pytest.approx(power * duration, rel=1e-6, abs=1e-6)


# --- integration and edges ----------------------------------------------------------------


def test_edge_segments_are_clipped_by_interpolation():
    """A ramp 0 -> 100 W over [0, 10] s (P = 10 t) integrated over [2, 8]: 5 (8² - 2²) J."""
    assert integrate([0.0, 10.0], [0.0, 100.0], 2.0, 8.0) == pytest.approx(300.0)
    est = window_energy(series([0.0, 10.0], [0.0, 100.0]), 2.0, 8.0, interval_s=10.0)
    assert (est.valid, est.energy_j, est.avg_power_w) == (True, pytest.approx(300.0), 50.0)


def test_edge_within_tolerance_holds_the_nearest_reading():
    """First sample 0.5 s after the start (tolerance 1 s): that reading covers the 0.5 s."""
    est = window_energy(series([0.5, 1.5, 2.5], [100.0] * 3), 0.0, 2.5, interval_s=1.0)
    assert est.valid and est.energy_j == pytest.approx(250.0)


@pytest.mark.parametrize(
    ("times", "window", "reason"),
    [
        ([1.5, 2.5, 3.5], (0.0, 3.0), "first sample 1.500 s after the window start"),
        ([-1.0, 0.0, 1.0], (0.0, 3.0), "last sample 2.000 s before the window end"),
        ([-1.0, 0.0, 3.5, 4.0], (0.0, 4.0), "gap of 3.500 s between samples at"),
    ],
)
def test_uncovered_windows_are_invalid_with_the_reason(times, window, reason):
    samples = series([-10.0, *times], [None, *([50.0] * len(times))])  # first has no power
    est = window_energy(samples, *window, interval_s=1.0)
    assert not est.valid
    assert est.energy_j is None and est.method is None
    assert reason in est.reason and est.reason.startswith("power samples: ")


def test_samples_without_power_or_counter_are_invalid():
    est = window_energy(series([0.0, 1.0, 2.0]), 0.0, 2.0, interval_s=1.0)
    assert (est.valid, est.reason, est.counter_note) == (False, "no power readings", None)


def test_a_gap_outside_the_window_does_not_matter():
    times = [-20.0, -1.0, 0.0, 1.0, 2.0, 30.0]
    est = window_energy(series(times, [10.0] * 6), 0.0, 1.5, interval_s=1.0)
    assert est.valid and est.energy_j == pytest.approx(15.0)


def test_tolerance_can_be_tightened():
    samples = series([0.5, 1.5, 2.5], [100.0] * 3)
    est = window_energy(samples, 0.0, 2.5, interval_s=1.0, tolerance_s=0.25)
    assert not est.valid and "tolerance 0.25 s" in est.reason


# --- the device counter -------------------------------------------------------------------


def test_counter_wins_over_power():
    """Power readings that miss a burst (sampled between spikes) under-count; the counter
    saw it: 1000 J over [0, 4] s although the readings say 100 W."""
    times = [0.0, 1.0, 2.0, 3.0, 4.0]
    est = window_energy(
        series(times, [100.0] * 5, [0.0, 250.0, 500.0, 750.0, 1000.0]), 0.0, 4.0, interval_s=1.0
    )
    assert (est.method, est.energy_j, est.avg_power_w) == ("counter", 1000.0, 250.0)
    assert est.counter_note is None


def test_counter_edges_are_interpolated():
    times = [0.0, 2.0, 4.0]
    est = window_energy(
        series(times, [1.0] * 3, [1e9, 1e9 + 200, 1e9 + 400]), 1.0, 3.0, interval_s=2.0
    )
    assert (est.method, est.energy_j) == ("counter", pytest.approx(200.0))


def test_counter_wrap_or_reset_falls_back_to_power():
    """A driver reload restarts the counter: its difference would be negative nonsense."""
    times = [0.0, 1.0, 2.0, 3.0]
    est = window_energy(
        series(times, [200.0] * 4, [5e6, 5e6 + 200, 150.0, 350.0]), 0.0, 3.0, interval_s=1.0
    )
    assert (est.valid, est.method, est.energy_j) == (True, "power", pytest.approx(600.0))
    assert "went backwards between +1.000 s and +2.000 s" in est.counter_note


def test_counter_missing_in_some_samples_falls_back_to_power():
    times = [0.0, 1.0, 2.0]
    est = window_energy(series(times, [10.0] * 3, [0.0, None, 20.0]), 0.0, 2.0, interval_s=1.0)
    assert est.method == "power" and "missing in 1 of the window's 3 samples" in est.counter_note


def test_counter_needs_readings_around_both_edges():
    times = [0.5, 1.5, 2.5]
    est = window_energy(series(times, [100.0] * 3, [0.0, 100.0, 200.0]), 0.0, 2.5, interval_s=1.0)
    assert est.method == "power" and "both window edges" in est.counter_note


def test_counter_only_series_with_a_gap_is_invalid():
    times = [0.0, 1.0, 9.0, 10.0]
    est = window_energy(series(times, None, [0.0, 1.0, 9.0, 10.0]), 0.0, 10.0, interval_s=1.0)
    assert not est.valid
    assert est.reason.startswith("no power readings; energy counter samples do not cover")
    assert "gap of 8.000 s" in est.reason and "gap of 8.000 s" in est.counter_note


# --- misuse -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("samples", "window", "interval", "match"),
    [
        ([], (0.0, 1.0), 1.0, "no samples"),
        (series([0.0, 1.0], [1.0, 1.0]), (1.0, 1.0), 1.0, "not after its start"),
        (series([0.0, 1.0], [1.0, 1.0]), (0.0, 1.0), 0.0, "not positive"),
        (series([0.0], [1.0]) + series([1.0], [1.0], gpu=1), (0.0, 1.0), 1.0, "several GPUs"),
    ],
)
def test_misuse_is_a_value_error(samples, window, interval, match):
    with pytest.raises(ValueError, match=match):
        window_energy(samples, *window, interval_s=interval)


# --- per point ----------------------------------------------------------------------------


def estimate(gpu, energy, *, valid=True, start=0.0, end=100.0, host="h1") -> EnergyEstimate:
    return EnergyEstimate(
        host=host,
        gpu=gpu,
        start_s=start,
        end_s=end,
        valid=valid,
        reason=None if valid else "power samples: no samples",
        method="counter" if valid else None,
        energy_j=energy if valid else None,
        avg_power_w=energy / (end - start) if valid else None,
    )


def test_point_figures_from_two_gpus():
    """2 GPUs × 50 kJ over 100 s (1 kW in all) for 20 000 output tokens at $2/GPU-hour:
    5 J/token, 200 tokens/s per kW, 2 × (100/3600) h × $2 / 0.02 M tokens = $5.56/M."""
    point = point_energy(
        [estimate(0, 50_000.0), estimate(1, 50_000.0)],
        output_tokens=20_000,
        gpu_count=2,
        gpu_hour_usd=2.0,
    )
    assert point.valid and point.reason is None
    assert (point.energy_j, point.avg_power_w) == (100_000.0, 1000.0)
    assert point.joules_per_output_token == pytest.approx(5.0)
    assert point.output_tokens_per_s_per_kw == pytest.approx(200.0)
    assert point.usd_per_million_output_tokens == pytest.approx(2 * 100 / 3600 * 2.0 / 0.02)


def test_one_uncovered_gpu_voids_the_energy_figures_not_the_cost():
    point = point_energy(
        [estimate(0, 50_000.0), estimate(1, 0.0, valid=False)],
        output_tokens=20_000,
        gpu_count=2,
        gpu_hour_usd=2.0,
    )
    assert not point.valid
    assert point.reason == "h1 GPU 1: power samples: no samples"
    assert point.energy_j is None and point.joules_per_output_token is None
    assert point.usd_per_million_output_tokens == pytest.approx(5.5556, rel=1e-4)


def test_missing_gpu_telemetry_is_named():
    point = point_energy([estimate(0, 1.0)], output_tokens=10, gpu_count=8)
    assert not point.valid and point.reason == "telemetry for 1 of 8 GPUs"


def test_no_output_tokens_leaves_per_token_figures_empty():
    point = point_energy([estimate(0, 100.0)], output_tokens=0, gpu_count=1, gpu_hour_usd=3.0)
    assert point.valid and point.energy_j == 100.0
    assert point.joules_per_output_token is None
    assert point.output_tokens_per_s_per_kw is None
    assert point.usd_per_million_output_tokens is None


def test_point_misuse_is_a_value_error():
    with pytest.raises(ValueError, match="different windows"):
        point_energy([estimate(0, 1.0), estimate(1, 1.0, end=50.0)], output_tokens=1, gpu_count=2)
    with pytest.raises(ValueError, match="no GPU estimates"):
        point_energy([], output_tokens=1, gpu_count=1)
    dup = point_energy([estimate(0, 1.0), estimate(0, 1.0)], output_tokens=1, gpu_count=2)
    assert not dup.valid and "a GPU appears twice" in dup.reason
