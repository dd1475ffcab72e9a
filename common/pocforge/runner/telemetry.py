"""Telemetry around the benchmarks this machine runs: the kit's recorder
(:mod:`pocforge.telemetry.recorder`, the engine every cluster node runs too) in this process
for the length of each serving point and of the training run, and the energy figures of
each measured window.

- Serving: :class:`ServingTelemetry` is the sweep's :class:`~pocforge.bench.sweep.PointHook`.
  Before a point it starts recording (``serving/<workload>/telemetry-<point>.raw.jsonl``)
  and waits for every source's first record, so the point's first window is covered; after
  it, it waits for a record past the last window's end, stops, reads the file as a series
  (:func:`pocforge.telemetry.reader.read_raw`), integrates each repeat's window
  (:func:`pocforge.telemetry.series.window`), writes the series with its windows
  (``telemetry-<point>.jsonl``) and puts the figures into the repeats' metrics
  (``avg_power_w``, ``joules_per_token``, ``tokens_per_s_per_kw``,
  ``usd_per_million_tokens``: :mod:`pocforge.metrics`), where the sweep aggregates them and
  the verdicts judge them. A window the samples do not cover, or a node without a power
  source, gets no energy figures and a note on the point saying why;
  ``usd_per_million_tokens`` needs only a price.
- Training: :func:`training_telemetry` records the whole run into
  ``training/telemetry.jsonl`` with its window and, where the steps carry their end times
  (the kit's own runs), the measured steps' window: the energy per training token.

Telemetry never fails a stage: a recorder that cannot start or a source that breaks is a
note and a line in the series.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from pocforge.bench.summary import PointSummary
from pocforge.bench.sweep import PointHook
from pocforge.catalog.prices import gpu_price
from pocforge.spec import PocSpec
from pocforge.telemetry.energy import usd_per_million_tokens
from pocforge.telemetry.host import PackageSample
from pocforge.telemetry.parsers import GpuSample
from pocforge.telemetry.reader import read_raw
from pocforge.telemetry.recorder import Recorder
from pocforge.telemetry.series import Series, Window, window
from pocforge.telemetry.sources import DEFAULT_INTERVAL_S, recorder_plan
from pocforge.training.summary import TrainingSummary

Say = Callable[[str], None]
PlanFor = Callable[[float, str], dict]  # (interval, raw file) -> the recorder's plan
FIRST_SAMPLE_TIMEOUT_S = 15.0  # nvidia-smi and amd-smi take a moment to print their first


class Recording:
    """The recorder in this process over one piece of work, read back as a series."""

    def __init__(self, raw: Path, interval_s: float, plan: PlanFor = recorder_plan) -> None:
        self.raw = Path(raw)
        self.interval_s = interval_s
        self.raw.unlink(missing_ok=True)  # a point run again records afresh
        self.recorder = Recorder(plan(interval_s, str(self.raw)))

    def start(self) -> Recording:
        self.recorder.start()
        self.recorder.wait_until(time.time(), FIRST_SAMPLE_TIMEOUT_S)
        return self

    def finish(self, until: float | None) -> Series:
        """Stop once every source has a record past ``until`` (the work's end); the series."""
        try:
            if until is not None:
                self.recorder.wait_until(until, 3 * self.interval_s + 2.0)
        finally:
            self.recorder.stop()
        return read_raw(self.raw)

    def said(self, what: str, series: Series) -> str:
        cost = series.end.cpu_pct_of_core if series.end else 0.0
        return (
            f"telemetry: {what} {len(series.gpu)} GPU and {len(series.host)} host samples,"
            f" recorder {cost:.2f}% of a core"
        )


def gpu_hour_price(spec: PocSpec) -> float | None:
    """The POC's GPU-hour price: ``compare.price_per_gpu_hour``, else the catalog's for
    ``cluster.gpu`` on ``compare.price_basis`` (None when it lists none)."""
    if spec.compare.price_per_gpu_hour:
        return spec.compare.price_per_gpu_hour
    try:
        return gpu_price(spec.cluster.gpu, spec.compare.price_basis)
    except KeyError:
        return None


def energy_metrics(
    win: Window, gpus: int, seconds: float, tokens: int, price: float | None
) -> dict[str, float]:
    """The serving energy metrics of one window (only those measured)."""
    out: dict[str, float] = {}
    energy = win.energy
    if energy is not None and energy.valid:
        figures = {
            "avg_power_w": energy.avg_power_w,
            "joules_per_token": energy.joules_per_output_token,
            "tokens_per_s_per_kw": energy.output_tokens_per_s_per_kw,
        }
        out.update({k: v for k, v in figures.items() if v is not None})
    usd = usd_per_million_tokens(gpus, seconds, tokens, price)
    if usd is not None:
        out["usd_per_million_tokens"] = usd
    return out


class ServingTelemetry(PointHook):
    """The recorder around each point of one workload's sweep (see the module notes)."""

    def __init__(
        self,
        folder: Path,
        *,
        gpus: int,
        price: float | None,
        say: Say = print,
        interval_s: float = DEFAULT_INTERVAL_S,
        plan: PlanFor = recorder_plan,
    ) -> None:
        self.folder = Path(folder)
        self.gpus = gpus
        self.price = price
        self.say = say
        self.interval_s = interval_s
        self.plan = plan
        self._recording: Recording | None = None

    @property
    def recording(self) -> Recording | None:
        """The recording of the point in progress (None between points)."""
        return self._recording

    def before(self, point: PointSummary) -> None:
        try:
            raw = self.folder / f"telemetry-{point.id}.raw.jsonl"
            self._recording = Recording(raw, self.interval_s, self.plan).start()
        except Exception as exc:  # telemetry must never stop the benchmark
            self._recording = None
            point.notes.append(f"telemetry not sampled: {type(exc).__name__}: {exc}")
            self.say(f"telemetry: {point.id} not sampled ({exc})")

    def after(self, point: PointSummary) -> None:
        recording, self._recording = self._recording, None
        series = None
        try:
            if recording is not None:
                span = window_span(point)
                series = recording.finish(span[1] if span else None)
                self.say(recording.said(point.id, series))
        except Exception as exc:
            point.notes.append(f"telemetry not read: {type(exc).__name__}: {exc}")
        try:
            measure_point(self.folder, point, series, interval_s=self.interval_s,
                          gpus=self.gpus, price=self.price)  # fmt: skip
        except Exception as exc:
            point.notes.append(f"energy not computed: {type(exc).__name__}: {exc}")

    def close(self) -> None:
        """Stop a recording a sweep left running (it raised inside a point)."""
        if self._recording is not None:
            self._recording.recorder.stop()
            self._recording = None


def measure_point(
    folder: Path,
    point: PointSummary,
    series: Series | None,
    *,
    interval_s: float,
    gpus: int,
    price: float | None,
) -> None:
    """Each repeat's window over ``series`` (None: not sampled) into its metrics, and the
    series with its windows written as the point's telemetry file."""
    windows = point_energy(
        point,
        series.gpu if series else [],
        series.packages if series else [],
        sampled=series is not None,
        interval_s=interval_s,
        gpus=gpus,
        price=price,
    )
    if series is not None:
        series.windows = windows
        path = series.write(Path(folder) / f"telemetry-{point.id}.jsonl")
        point.telemetry_file = path.name


def measured_repeats(point: PointSummary) -> list:
    """The repeats of ``point`` that ran and have a window on the clock."""
    return [
        r
        for r in point.repeats
        if r.status == "ok" and r.started_unix_s is not None and r.duration_s > 0
    ]


def window_span(point: PointSummary) -> tuple[float, float] | None:
    """From the first measured repeat's start to the last one's end (None: none measured)."""
    repeats = measured_repeats(point)
    if not repeats:
        return None
    starts = [r.started_unix_s or 0.0 for r in repeats]
    return min(starts), max(s + r.duration_s for s, r in zip(starts, repeats, strict=True))


def point_energy(
    point: PointSummary,
    gpu: Sequence[GpuSample],
    packages: Sequence[PackageSample],
    *,
    sampled: bool,
    interval_s: float,
    gpus: int,
    price: float | None,
) -> list[Window]:
    """Each measured repeat's window over the samples (of one node or of all a cluster's),
    its energy figures put into the repeat's metrics, a note on the point where a window
    has none; the windows, for the telemetry file."""
    windows, problems = [], []
    repeats = measured_repeats(point)
    for r in repeats:
        start = r.started_unix_s or 0.0
        tokens = round((r.metrics.get("output_throughput") or 0.0) * r.duration_s)
        label = f"repeat {r.repeat}"
        if sampled:
            win = window(
                gpu,
                packages,
                start,
                start + r.duration_s,
                interval_s=interval_s,
                output_tokens=tokens,
                gpu_count=gpus,
                label=label,
                repeat=r.repeat,
            )
        else:
            win = Window(
                label=label,
                repeat=r.repeat,
                start_s=start,
                end_s=start + r.duration_s,
                problem="not sampled",
            )
        r.metrics.update(energy_metrics(win, gpus, r.duration_s, tokens, price))
        if win.problem:
            problems.append(f"repeat {r.repeat}: {win.problem}")
        windows.append(win)
    if problems:
        point.notes.append(_energy_note(problems, len(repeats)))
    return windows


def _energy_note(problems: list[str], repeats: int) -> str:
    """One note for the point: the reason once when every repeat has the same."""
    reasons = {p.split(": ", 1)[1] for p in problems}
    if len(reasons) == 1 and len(problems) == repeats:
        return f"energy not measured: {reasons.pop()}"
    return "energy not measured in " + "; ".join(problems)


@dataclass
class TrainingTelemetry:
    """What :func:`training_telemetry` yields: the block sets ``summary`` once the run has
    one, and its measured steps get a window of their own."""

    summary: TrainingSummary | None = None


@contextlib.contextmanager
def training_telemetry(
    stage_dir: Path,
    gpus: int,
    say: Say = print,
    interval_s: float = DEFAULT_INTERVAL_S,
    plan: PlanFor = recorder_plan,
) -> Iterator[TrainingTelemetry]:
    """Record the node while the block (the training run) runs; the series and its windows
    (the whole run, and its measured steps: :func:`training_windows`) are written to
    ``training/telemetry.jsonl`` and their energy said."""
    recording: Recording | None = None
    try:
        recording = Recording(stage_dir / "telemetry.raw.jsonl", interval_s, plan).start()
    except Exception as exc:  # telemetry must never stop the training
        say(f"telemetry: training not sampled ({type(exc).__name__}: {exc})")
    start = time.time()
    trained = TrainingTelemetry()
    try:
        yield trained
    finally:
        if recording is not None:
            _finish_training(recording, start, gpus, trained.summary, say)


def measured_steps(summary: TrainingSummary | None) -> tuple[float, float, int] | None:
    """(start, end, tokens) of the steps after warm-up, on the clock of their end times;
    None when the run's steps carry none (a log without times) or none is measured."""
    if summary is None:
        return None
    steps = [s for s in summary.loss_curve if s.step >= summary.warmup_steps]
    if not steps or any(s.ended_unix_s is None for s in steps):
        return None
    start = min((s.ended_unix_s or 0.0) - s.seconds for s in steps)
    end = max(s.ended_unix_s or 0.0 for s in steps)
    return start, end, summary.tokens_per_step * len(steps)


def training_windows(
    gpu: Sequence[GpuSample],
    packages: Sequence[PackageSample],
    start: float,
    end: float,
    summary: TrainingSummary | None,
    *,
    interval_s: float,
    gpus: int,
    say: Say,
    where: str = "",
) -> list[Window]:
    """The training run's window over the samples (of one node, or of a cluster's ``where``
    says), and its measured steps' window with the tokens they trained (the energy per
    training token), each said in one line."""
    win = window(gpu, packages, start, end, interval_s=interval_s, output_tokens=0,
                 gpu_count=gpus, label="training")  # fmt: skip
    if win.energy is not None and win.energy.valid:
        say(
            f"telemetry: training {win.energy.energy_j:,.0f} J over {end - start:.0f} s"
            f"{where}, {win.energy.avg_power_w:,.0f} W on average ({win.devices})"
        )
    else:
        say(f"telemetry: training energy not measured ({win.problem})")
    windows = [win]
    measured = measured_steps(summary)
    if measured is not None:
        s0, s1, tokens = measured
        steps = window(gpu, packages, s0, s1, interval_s=interval_s, output_tokens=tokens,
                       gpu_count=gpus, label="training steps")  # fmt: skip
        energy = steps.energy
        if energy is not None and energy.valid and energy.joules_per_output_token is not None:
            say(
                f"telemetry: training steps {energy.joules_per_output_token:.4g} J per token"
                f"{where} ({tokens:,} tokens in {s1 - s0:.1f} s)"
            )
        else:
            say(f"telemetry: training steps' energy not measured ({steps.problem})")
        windows.append(steps)
    return windows


def _finish_training(
    recording: Recording, start: float, gpus: int, summary: TrainingSummary | None, say: Say
) -> None:
    end = time.time()
    try:
        series = recording.finish(end)
        say(recording.said("training", series))
        series.windows += training_windows(
            series.gpu, series.packages, start, end, summary,
            interval_s=recording.interval_s, gpus=gpus, say=say,
        )  # fmt: skip
        series.write(recording.raw.parent / "telemetry.jsonl")
    except Exception as exc:  # the training's own result stands
        say(f"telemetry: training energy not computed ({type(exc).__name__}: {exc})")
