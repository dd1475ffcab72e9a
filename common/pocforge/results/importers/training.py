"""The training result of another tool's log: its steady window, rates, MFU and loss curve.

The training importers (``megatron_log``, ``dgxc``) read their tool's per-step lines into
:class:`LoggedStep` and hand them to :func:`training_result`, so every import averages,
derives and judges the same way:

- **window**: the steps with ``warmup < iteration`` (and ``iteration <= last`` where the
  tool's own window ends: dgxc-benchmarking averages iterations 35–44); iteration numbers
  are the tool's as printed (Megatron counts from 1, NeMo from 0). Without a warm-up
  count (``--warmup N`` or the tool's own window), warm-up is found by what it is
  (:func:`steady_start`): the logged line that covers the first iteration (setup,
  compilation, the first data loads: with ``--log-interval 10`` the whole first line), then
  every leading line more than 5% off the median pace of the lines after it;
- **rates** over the window are harmonic means of the per-step rates
  (:func:`pocforge.stats.harmonic_mean`): with the same work in every step, total work /
  total time, the throughput the run delivered (as
  :func:`pocforge.training.megatron_log.steady_state`);
- **tokens/s/GPU**: the tool's own figure where it prints one, else global batch ×
  sequence length / world size / step time when the sequence length is known;
- **TFLOP/s/GPU**: the tool's own figure, from its own FLOP count (each importer states it);
- **MFU**: that TFLOP/s/GPU / the catalog's dense peak for the dtype
  (:meth:`pocforge.catalog.GPU.dense_tflops`), only when the GPU type and the dtype are
  both known — never guessed;
- **final loss**: the mean of the last three logged losses (as the kit's Megatron summary).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from pocforge.catalog import gpu
from pocforge.results.importers.common import ResultImportError
from pocforge.results.stage_schema import DefinitionDifference, TrainingResult, TrainingStep
from pocforge.stats import harmonic_mean

DTYPES = ("bfloat16", "float16", "float32", "fp8")


@dataclass
class LoggedStep:
    """One step (or log interval) as the tool printed it; None where it printed nothing."""

    iteration: int
    line: int
    step_time_s: float | None = None
    loss: float | None = None
    tflops_per_gpu: float | None = None
    tokens_per_s_per_gpu: float | None = None
    global_batch_size: int | None = None


@dataclass
class TrainingOptions:
    """What a log may not say, given on the command line (``pocforge import``)."""

    gpus: int | None = None  # world size
    gpu: str | None = None  # catalog GPU type
    dtype: str | None = None
    seq_len: int | None = None
    warmup: int | None = None  # iterations <= warmup are left out of the rates


def read_log_text(path: Path, what: str) -> str:
    """A log's text (undecodable bytes replaced, as a log may carry a stray one); an empty
    file or one with NUL bytes (binary data) is one clear error naming the file."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ResultImportError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if not data.strip():
        raise ResultImportError(f"{path}: empty file, not {what}")
    if b"\x00" in data:
        raise ResultImportError(f"{path}: binary data, not {what}")
    return data.decode("utf-8", errors="replace")


def world_size(path: Path, options: TrainingOptions, logged: int | None) -> int:
    """--gpus, or the world size the log names; both given must agree."""
    if options.gpus and logged and options.gpus != logged:
        raise ResultImportError(
            f"{path}: --gpus {options.gpus} but the log's world_size is {logged}"
        )
    size = options.gpus or logged
    if not size:
        raise ResultImportError(
            f"{path}: the log does not name its world size: give --gpus (GPUs that trained it)"
        )
    return size


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) and value > 0 else None


STABLE = 0.05  # a leading logged line more than 5% off the later lines' median is warm-up


def _pace(step: LoggedStep) -> float | None:
    """Seconds per iteration, or the inverse of a rate where the line prints no time."""
    if (time := _finite(step.step_time_s)) is not None:
        return time
    rate = _finite(step.tflops_per_gpu) or _finite(step.tokens_per_s_per_gpu)
    return 1.0 / rate if rate else None


def steady_start(steps: list[LoggedStep]) -> tuple[int, str]:
    """(the last warm-up iteration, 0 for none; why). Warm-up is the logged line covering
    the run's first iteration (its interval reaches back to it: Megatron counts from 1,
    NeMo from 0; a lone line, iteration 1 or 0), then each leading line more than
    :data:`STABLE` slower than the median pace of the lines after it (warm-up is slow: a
    run that slows down later keeps its fast start), never more than half of the lines."""
    paced = [(s, pace) for s in steps if (pace := _pace(s)) is not None]
    if not paced:
        return 0, "no timed steps: no warm-up to find"
    why = []
    first = paced[0][0].iteration
    interval = paced[1][0].iteration - first if len(paced) > 1 else 1
    covers_first = first <= interval  # its interval starts at the run's first iteration
    if covers_first:
        why.append(f"the first logged line (iteration {first}) covers the first iteration")
    start = int(covers_first)
    while len(paced) - start >= 3 and start < len(paced) // 2:
        rest = sorted(pace for _, pace in paced[start + 1 :])
        median = rest[len(rest) // 2]
        if paced[start][1] <= median * (1 + STABLE):
            break
        start += 1
    if start > int(covers_first):  # slow lines past the first one
        why.append(
            f"iterations through {paced[start - 1][0].iteration} are more than "
            f"{STABLE:.0%} slower than the steady median pace"
        )
    if start == 0 and len(paced) < 3:
        return 0, "too few logged steps to judge, none covering the first iteration: all averaged"
    if start == 0:
        return 0, "no warm-up found: the first logged step is already steady"
    return paced[start - 1][0].iteration, "warm-up by stability: " + "; ".join(why)


def _mfu(tflops_per_gpu: float, options: TrainingOptions, notes: list[str]) -> float | None:
    if not (options.gpu and options.dtype):
        missing = " and ".join(
            n for n, v in (("--gpu", options.gpu), ("--dtype", options.dtype)) if not v
        )
        notes.append(f"MFU: not computed, the GPU type or the dtype is unknown (give {missing})")
        return None
    peak = gpu(options.gpu).dense_tflops(options.dtype)
    if not peak:
        notes.append(f"MFU: not computed, the catalog has no {options.dtype} peak")
        return None
    notes.append(
        f"MFU: the tool's TFLOP/s/GPU / the {options.gpu} dense {options.dtype} peak of "
        f"{peak:g} TFLOP/s (catalog)"
    )
    return tflops_per_gpu / peak


def training_result(
    path: Path,
    steps: list[LoggedStep],
    *,
    tool: str,
    framework: str,
    world: int,
    options: TrainingOptions,
    warmup: int | None,
    last: int | None = None,
    peak_memory_gb: float | None = None,
    definitions: dict[str, str],
    differences: list[DefinitionDifference],
    notes: list[str],
) -> TrainingResult:
    """The :class:`TrainingResult` of ``steps`` (see the module docstring for each number);
    ``warmup`` None: found by :func:`steady_start`."""
    notes = list(notes)
    if warmup is None:
        warmup, why = steady_start(steps)
        notes.append(why)
    window = [s for s in steps if s.iteration > warmup and (last is None or s.iteration <= last)]
    if not window:
        seen = max((s.iteration for s in steps), default=None)
        span = (
            f"iterations {warmup + 1}–{last}" if last is not None else f"after iteration {warmup}"
        )
        raise ResultImportError(
            f"{path}: no logged step {span} to average (last logged: {seen}); "
            "give --warmup N to leave out only iterations <= N"
        )
    tokens = []
    for s in window:
        rate = _finite(s.tokens_per_s_per_gpu)
        time = _finite(s.step_time_s)
        if rate is None and time and s.global_batch_size and options.seq_len:
            rate = s.global_batch_size * options.seq_len / world / time
        if rate is not None:
            tokens.append(rate)
    tflops = [v for s in window if (v := _finite(s.tflops_per_gpu)) is not None]
    tokens_per_gpu = harmonic_mean(tokens) if tokens else None
    tflops_per_gpu = harmonic_mean(tflops) if tflops else None
    first, final = window[0].iteration, window[-1].iteration
    notes.append(
        f"rates are harmonic means over the {len(window)} logged step(s) of iterations "
        f"{first}–{final}; iterations <= {warmup} are warm-up"
        + (f" and those after {last} are left out (the tool's own window)" if last else "")
    )
    for name, values in (("tokens/s/GPU", tokens), ("TFLOP/s/GPU", tflops)):
        if values and len(values) < len(window):
            notes.append(f"{name} over the {len(values)} of {len(window)} steps that print it")
    if not tokens:
        notes.append(
            "tokens/s/GPU: the log prints none; give --seq-len to derive it from the "
            "global batch size and step time"
        )
    mfu = None
    if tflops_per_gpu is not None:
        mfu = _mfu(tflops_per_gpu, options, notes)
    curve = [
        TrainingStep(
            step=s.iteration,
            loss=s.loss,
            step_time_s=_finite(s.step_time_s),
            tokens=s.global_batch_size * options.seq_len
            if s.global_batch_size and options.seq_len
            else None,
        )
        for s in steps
        if s.loss is not None and math.isfinite(s.loss)
    ]
    if len(curve) < sum(s.loss is not None for s in steps):
        notes.append("steps with a non-finite loss are left out of the loss curve")
    tail = [s.loss for s in curve[-3:]]
    return TrainingResult(
        tool=tool,
        source_file=Path(path).name,
        framework=framework,
        world_size=world,
        gpu=options.gpu,
        dtype=options.dtype,
        warmup_steps=warmup,
        steps=curve,
        tokens_per_s_per_gpu=tokens_per_gpu,
        tflops_per_gpu=tflops_per_gpu,
        mfu=mfu,
        peak_memory_gb=peak_memory_gb,
        final_loss=sum(tail) / len(tail) if tail else None,
        definitions=definitions,
        differences=differences,
        notes=notes,
    )
