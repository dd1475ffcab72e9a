"""Energy of a benchmark point from one GPU's telemetry series, and the per-point figures.

:func:`window_energy` takes one device's samples (a GPU's
:class:`~pocforge.telemetry.parsers.GpuSample`, or a CPU package's
:class:`~pocforge.telemetry.host.PackageSample` on a host without GPUs; any order) and a
point's own window ``[start_s, end_s]``:

- **Coverage.** A window the samples do not cover is ``valid=False`` with the reason, never
  estimated: the first sample later than ``start + tolerance``, the last earlier than
  ``end - tolerance``, or two consecutive samples overlapping the window more than
  ``3 × interval_s`` apart. ``tolerance_s`` defaults to one interval.
- **Counter.** When every sample from the last one at or before ``start`` to the first one at
  or after ``end`` carries the device energy counter (``energy_j``), the energy is the
  counter's difference, each edge read by linear interpolation between the two samples around
  it: the device integrates far faster than any sampler, so the counter wins. A counter that
  goes backwards there (a wrap or a driver reload) is not used; the power readings are, and
  ``counter_note`` says why.
- **Power.** Otherwise the energy is the trapezoid integral of ``power_w`` over the window:
  the integral of the piecewise-linear interpolation of the samples, the first and last
  segments clipped to the window by linear interpolation (and a reading held flat over the
  sub-tolerance stretch between a window edge and a first or last sample inside it). Being
  one integral of one interpolant, the estimates of two adjacent windows add up to that of
  their union.

:func:`point_energy` sums a point's GPUs and derives the per-point figures:

- ``joules_per_output_token`` = Σ energy over the point's GPUs / output tokens;
- ``output_tokens_per_s_per_kw`` = (output tokens / window s) / (Σ average power / 1000);
- ``usd_per_million_output_tokens`` = GPU count × window h × GPU-hour price / (output tokens
  / 10^6): what the GPUs cost while they produced the tokens, telemetry or not
  (:func:`usd_per_million_tokens`).

The energy figures are ``None`` unless every GPU of the point has a valid estimate.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

GAP_INTERVALS = 3.0  # a gap longer than this many sampling intervals breaks coverage


class Reading(Protocol):
    """What the integration reads of a sample: a GpuSample, or a CPU package's reading
    (its package index as ``gpu``)."""

    @property
    def host(self) -> str: ...
    @property
    def gpu(self) -> int: ...
    @property
    def timestamp_s(self) -> float: ...
    @property
    def power_w(self) -> float | None: ...
    @property
    def energy_j(self) -> float | None: ...


class EnergyEstimate(BaseModel):
    """One GPU's energy over one window; ``valid=False`` carries the reason instead."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    host: str
    gpu: int = Field(description="The device's index (a GPU, or a CPU package).")
    device: str = Field("GPU", description="What the device is: GPU, or CPU package.")
    start_s: float
    end_s: float
    valid: bool
    reason: str | None = Field(None, description="Why the window is not covered.")
    method: Literal["counter", "power"] | None = Field(
        None, description="counter: device energy counter difference; power: trapezoid of power."
    )
    energy_j: float | None = None
    avg_power_w: float | None = Field(None, description="energy_j / window length.")
    counter_note: str | None = Field(
        None, description="Why the device counter was not used, where samples carry one."
    )

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


class PointEnergy(BaseModel):
    """A benchmark point's energy over all its GPUs and the figures per output token."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    start_s: float
    end_s: float
    gpu_count: int
    output_tokens: int
    valid: bool
    reason: str | None = None
    energy_j: float | None = Field(None, description="Σ energy over the point's GPUs, J.")
    avg_power_w: float | None = Field(None, description="Σ average power over the GPUs, W.")
    joules_per_output_token: float | None = None
    output_tokens_per_s_per_kw: float | None = None
    usd_per_million_output_tokens: float | None = None
    per_gpu: tuple[EnergyEstimate, ...] = ()


def _value_at(times: Sequence[float], values: Sequence[float], t: float) -> float:
    """The piecewise-linear interpolant of ``(times, values)`` at ``t``, held flat outside."""
    if t <= times[0]:
        return values[0]
    if t >= times[-1]:
        return values[-1]
    i = bisect.bisect_right(times, t)
    t0, t1 = times[i - 1], times[i]
    if t1 == t0:
        return values[i]
    return values[i - 1] + (values[i] - values[i - 1]) * (t - t0) / (t1 - t0)


def integrate(times: Sequence[float], values: Sequence[float], start: float, end: float) -> float:
    """Trapezoid integral over ``[start, end]`` of the samples' piecewise-linear interpolant
    (``times`` ascending); the edge segments are clipped by interpolation."""
    points = [start, *(t for t in times if start < t < end), end]
    heights = [_value_at(times, values, t) for t in points]
    return sum(
        (points[i + 1] - points[i]) * (heights[i] + heights[i + 1]) / 2
        for i in range(len(points) - 1)
    )


def coverage_problem(
    times: Sequence[float], start: float, end: float, *, interval_s: float, tolerance_s: float
) -> str | None:
    """Why ``times`` (ascending) do not cover ``[start, end]``, or ``None`` if they do."""
    if not times:
        return "no samples"
    if times[0] > start + tolerance_s:
        return (
            f"first sample {times[0] - start:.3f} s after the window start "
            f"(tolerance {tolerance_s:g} s)"
        )
    if times[-1] < end - tolerance_s:
        return (
            f"last sample {end - times[-1]:.3f} s before the window end "
            f"(tolerance {tolerance_s:g} s)"
        )
    for a, b in zip(times, times[1:], strict=False):
        if b > start and a < end and b - a > GAP_INTERVALS * interval_s:
            return (
                f"gap of {b - a:.3f} s between samples at {a - start:+.3f} s and "
                f"{b - start:+.3f} s from the window start (over {GAP_INTERVALS:g} × the "
                f"{interval_s:g} s interval)"
            )
    return None


def _span(samples: Sequence[Reading], start: float, end: float) -> list[Reading]:
    """The samples from the last one at or before ``start`` to the first at or after ``end``."""
    times = [s.timestamp_s for s in samples]
    first = max(bisect.bisect_right(times, start) - 1, 0)
    last = min(bisect.bisect_left(times, end), len(samples) - 1)
    return list(samples[first : last + 1])


def _counter_energy(
    span: Sequence[Reading], start: float, end: float, coverage: str | None
) -> tuple[float | None, str | None]:
    """The counter's difference over the window, or ``None`` and why it cannot be used."""
    missing = sum(s.energy_j is None for s in span)
    if missing == len(span):
        return None, None
    if missing:
        return None, f"energy counter missing in {missing} of the window's {len(span)} samples"
    if coverage is not None:
        return None, f"energy counter samples do not cover the window: {coverage}"
    times = [s.timestamp_s for s in span]
    counter = [s.energy_j for s in span if s.energy_j is not None]
    if times[0] > start or times[-1] < end:
        return None, "no counter reading at or beyond both window edges to interpolate from"
    for i in range(1, len(span)):
        if counter[i] < counter[i - 1]:
            return None, (
                f"energy counter went backwards between {times[i - 1] - start:+.3f} s and "
                f"{times[i] - start:+.3f} s (wrap or reset); integrated power instead"
            )
    return _value_at(times, counter, end) - _value_at(times, counter, start), None


def window_energy(
    samples: Sequence[Reading],
    start_s: float,
    end_s: float,
    *,
    interval_s: float,
    tolerance_s: float | None = None,
    device: str = "GPU",
) -> EnergyEstimate:
    """One device's energy over ``[start_s, end_s]`` from its samples (see the module notes);
    ``device`` names what it is in the estimate and its reasons."""
    if not samples:
        raise ValueError("no samples")
    if end_s <= start_s:
        raise ValueError(f"window end {end_s} is not after its start {start_s}")
    if interval_s <= 0:
        raise ValueError(f"sampling interval {interval_s} is not positive")
    gpus = {(s.host, s.gpu) for s in samples}
    if len(gpus) != 1:
        raise ValueError(f"samples of several GPUs: {sorted(gpus)}")
    ((host, gpu),) = gpus
    tolerance = interval_s if tolerance_s is None else tolerance_s
    ordered = sorted(samples, key=lambda s: s.timestamp_s)
    base = {"host": host, "gpu": gpu, "device": device, "start_s": start_s, "end_s": end_s}
    duration = end_s - start_s

    span = _span(ordered, start_s, end_s)
    counter_coverage = coverage_problem(
        [s.timestamp_s for s in span], start_s, end_s, interval_s=interval_s, tolerance_s=tolerance
    )
    energy, note = _counter_energy(span, start_s, end_s, counter_coverage)
    if energy is not None:
        return EnergyEstimate(
            **base, valid=True, method="counter", energy_j=energy, avg_power_w=energy / duration
        )

    powered = [s for s in ordered if s.power_w is not None]
    if not powered:
        reason = "no power readings" + (f"; {note}" if note else "")
        return EnergyEstimate(**base, valid=False, reason=reason, counter_note=note)
    times = [s.timestamp_s for s in powered]
    power = [s.power_w for s in powered if s.power_w is not None]
    problem = coverage_problem(times, start_s, end_s, interval_s=interval_s, tolerance_s=tolerance)
    if problem is not None:
        return EnergyEstimate(
            **base, valid=False, reason=f"power samples: {problem}", counter_note=note
        )
    energy = integrate(times, power, start_s, end_s)
    return EnergyEstimate(
        **base,
        valid=True,
        method="power",
        energy_j=energy,
        avg_power_w=energy / duration,
        counter_note=note,
    )


def point_energy(
    estimates: Sequence[EnergyEstimate],
    *,
    output_tokens: int,
    gpu_count: int,
    gpu_hour_usd: float | None = None,
) -> PointEnergy:
    """The point's figures from its GPUs' estimates over one shared window.

    ``gpu_count`` is how many GPUs the point ran on (and is billed for): fewer estimates than
    that is a point whose telemetry is incomplete."""
    if not estimates:
        raise ValueError("no GPU estimates")
    windows = {(e.start_s, e.end_s) for e in estimates}
    if len(windows) != 1:
        raise ValueError(f"estimates over different windows: {sorted(windows)}")
    if output_tokens < 0 or gpu_count < 1:
        raise ValueError(f"output_tokens={output_tokens}, gpu_count={gpu_count}")
    ((start_s, end_s),) = windows
    usd = usd_per_million_tokens(gpu_count, end_s - start_s, output_tokens, gpu_hour_usd)
    base = {
        "start_s": start_s,
        "end_s": end_s,
        "gpu_count": gpu_count,
        "output_tokens": output_tokens,
        "usd_per_million_output_tokens": usd,
        "per_gpu": tuple(estimates),
    }

    reasons = [f"{e.host} {e.device} {e.gpu}: {e.reason}" for e in estimates if not e.valid]
    if len({(e.host, e.gpu) for e in estimates}) != len(estimates):
        reasons.append(f"a {estimates[0].device} appears twice")
    if len(estimates) != gpu_count:
        devices = estimates[0].device + ("s" if gpu_count != 1 else "")
        reasons.append(f"telemetry for {len(estimates)} of {gpu_count} {devices}")
    if reasons:
        return PointEnergy(**base, valid=False, reason="; ".join(reasons))

    energy = sum(e.energy_j for e in estimates if e.energy_j is not None)
    power = sum(e.avg_power_w for e in estimates if e.avg_power_w is not None)
    per_token = energy / output_tokens if output_tokens else None
    per_kw = None
    if output_tokens and power > 0:
        per_kw = output_tokens / (end_s - start_s) / (power / 1000)
    return PointEnergy(
        **base,
        valid=True,
        energy_j=energy,
        avg_power_w=power,
        joules_per_output_token=per_token,
        output_tokens_per_s_per_kw=per_kw,
    )


def usd_per_million_tokens(
    gpus: int, seconds: float, output_tokens: int, gpu_hour_usd: float | None
) -> float | None:
    """What ``gpus`` GPUs cost over ``seconds`` per million output tokens; None without a
    price or tokens."""
    if gpu_hour_usd is None or output_tokens <= 0:
        return None
    return gpus * (seconds / 3600) * gpu_hour_usd / (output_tokens / 1e6)
