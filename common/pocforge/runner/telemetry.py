"""Telemetry around the benchmarks this machine runs: the sampler
(:mod:`pocforge.telemetry.sampler`) for the length of each serving point and of the
training run, and the energy figures of each measured window.

- Serving: :class:`ServingTelemetry` is the sweep's :class:`~pocforge.bench.sweep.PointHook`.
  Before a point it starts the sampler (``serving/<workload>/telemetry-<point>.jsonl``) and
  waits for every source's first sample, so the point's first window is covered; after it,
  it waits for a sample past the last window's end, integrates each repeat's window
  (:func:`pocforge.telemetry.series.window`), appends the windows to the file and puts the
  figures into the repeats' metrics (``avg_power_w``, ``joules_per_token``,
  ``tokens_per_s_per_kw``, ``usd_per_million_tokens``: :mod:`pocforge.metrics`), where the
  sweep aggregates them and the verdicts judge them. A window the samples do not cover,
  or a node without a power source, gets no energy figures and a note on the point saying
  why; ``usd_per_million_tokens`` needs only a price.
- Training: :func:`training_telemetry` samples the whole run into
  ``training/telemetry.jsonl`` with its window.

Telemetry never fails a stage: a sampler that cannot start or a source that breaks is a
note and a line in the series.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from pocforge.bench.summary import PointSummary
from pocforge.bench.sweep import PointHook
from pocforge.catalog.prices import gpu_price
from pocforge.spec import PocSpec
from pocforge.telemetry.energy import usd_per_million_tokens
from pocforge.telemetry.host import PackageSample
from pocforge.telemetry.parsers import GpuSample
from pocforge.telemetry.sampler import DEFAULT_INTERVAL_S, Sampler, Source, detect
from pocforge.telemetry.series import Window, window

Say = Callable[[str], None]
Detect = Callable[[float], tuple[list[Source], list[str]]]
FIRST_SAMPLE_TIMEOUT_S = 15.0  # nvidia-smi and amd-smi take a moment to print their first


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
    """The sampler around each point of one workload's sweep (see the module notes)."""

    def __init__(
        self,
        folder: Path,
        *,
        gpus: int,
        price: float | None,
        say: Say = print,
        interval_s: float = DEFAULT_INTERVAL_S,
        sources: Detect = detect,
    ) -> None:
        self.folder = Path(folder)
        self.gpus = gpus
        self.price = price
        self.say = say
        self.interval_s = interval_s
        self.sources = sources
        self._sampler: Sampler | None = None

    @property
    def sampler(self) -> Sampler | None:
        """The sampler of the point in progress (None between points)."""
        return self._sampler

    def before(self, point: PointSummary) -> None:
        try:
            found, not_used = self.sources(self.interval_s)
            path = self.folder / f"telemetry-{point.id}.jsonl"
            self._sampler = Sampler(
                path, interval_s=self.interval_s, sources=found, not_used=not_used
            ).start()
            point.telemetry_file = path.name
            self._sampler.wait_until(time.time(), FIRST_SAMPLE_TIMEOUT_S)
        except Exception as exc:  # telemetry must never stop the benchmark
            self._sampler = None
            point.notes.append(f"telemetry not sampled: {type(exc).__name__}: {exc}")
            self.say(f"telemetry: {point.id} not sampled ({exc})")

    def after(self, point: PointSummary) -> None:
        sampler, self._sampler = self._sampler, None
        try:
            span = window_span(point)
            if sampler is not None and span is not None:
                sampler.wait_until(span[1], 3 * self.interval_s + 2.0)
            gpu, packages = sampler.snapshot() if sampler is not None else ([], [])
            windows = point_energy(
                point,
                gpu,
                packages,
                sampled=sampler is not None,
                interval_s=self.interval_s,
                gpus=self.gpus,
                price=self.price,
            )
            if sampler is not None:
                for win in windows:
                    sampler.add(win)
        except Exception as exc:
            point.notes.append(f"energy not computed: {type(exc).__name__}: {exc}")
        finally:
            if sampler is not None:
                end = sampler.stop()
                self.say(
                    f"telemetry: {point.id} {len(sampler.gpu)} GPU and {len(sampler.host_samples)}"
                    f" host samples, sampler {end.cpu_pct_of_core:.2f}% of a core"
                )

    def close(self) -> None:
        """Stop a sampler a sweep left running (it raised inside a point)."""
        if self._sampler is not None:
            self._sampler.stop()
            self._sampler = None


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


@contextlib.contextmanager
def training_telemetry(
    stage_dir: Path, gpus: int, say: Say = print, interval_s: float = DEFAULT_INTERVAL_S
) -> Iterator[None]:
    """Sample the node while the block (the training run) runs; its window and energy are
    appended to ``training/telemetry.jsonl`` and said."""
    sampler: Sampler | None = None
    try:
        found, not_used = detect(interval_s)
        sampler = Sampler(
            stage_dir / "telemetry.jsonl", interval_s=interval_s, sources=found, not_used=not_used
        ).start()
        sampler.wait_until(time.time(), FIRST_SAMPLE_TIMEOUT_S)
    except Exception as exc:  # telemetry must never stop the training
        say(f"telemetry: training not sampled ({type(exc).__name__}: {exc})")
    start = time.time()
    try:
        yield
    finally:
        if sampler is not None:
            _finish_training(sampler, start, gpus, interval_s, say)


def training_window(
    gpu: Sequence[GpuSample],
    packages: Sequence[PackageSample],
    start: float,
    end: float,
    *,
    interval_s: float,
    gpus: int,
    say: Say,
    where: str = "",
) -> Window:
    """The training run's window over the samples (of one node, or of a cluster's ``where``
    says), said in one line."""
    win = window(
        gpu,
        packages,
        start,
        end,
        interval_s=interval_s,
        output_tokens=0,
        gpu_count=gpus,
        label="training",
    )
    if win.energy is not None and win.energy.valid:
        say(
            f"telemetry: training {win.energy.energy_j:,.0f} J over {end - start:.0f} s"
            f"{where}, {win.energy.avg_power_w:,.0f} W on average ({win.devices})"
        )
    else:
        say(f"telemetry: training energy not measured ({win.problem})")
    return win


def _finish_training(
    sampler: Sampler, start: float, gpus: int, interval_s: float, say: Say
) -> None:
    end = time.time()
    try:
        sampler.wait_until(end, 3 * interval_s + 2.0)
        gpu, packages = sampler.snapshot()
        sampler.add(
            training_window(gpu, packages, start, end, interval_s=interval_s, gpus=gpus, say=say)
        )
    except Exception as exc:  # the training's own result stands
        say(f"telemetry: training energy not computed ({type(exc).__name__}: {exc})")
    finally:
        sampler.stop()
