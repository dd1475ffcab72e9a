"""Megatron-LM training logs -> per-iteration records, memory reports and the steady state.

Megatron's ``training_log`` (``megatron/training/training.py``) prints one line per log
interval, ``|``-separated ``key: value`` fields after ``iteration N/ M``::

     [2024-04-06 02:55:45] iteration        2/     100 | consumed samples:          256 |
     elapsed time per iteration (ms): 5630.1 | throughput per GPU (TFLOP/s/GPU): 231.9 |
     learning rate: 4.000000E-07 | global batch size:   128 | lm loss: 2.021530E+00 | ...
     | number of skipped iterations:   0 | number of nan iterations:   0 |

(one line in the log), and after the first logged iteration ``[Rank R] (after N iterations)
memory (MB) | allocated: … | max allocated: … | reserved: … | max reserved: …``. The
variants read here, each seen in real output (``tests/data/megatron/``, sources in
``tests/data/README.md``):

- older versions: no timestamp and no ``throughput per GPU`` (``--log-throughput`` off or
  absent), only ``elapsed time per iteration (ms)``;
- ROCm/Megatron-LM (``rocm/megatron-lm`` images): ``mem usages: 0.6865``, the fraction of
  device memory in use;
- AMD Primus: ``X/Y`` pairs, X this iteration and Y Primus' running average (X is kept),
  ``hip mem usage/free/total/usage_ratio: 126.03GB/…/255.98GB/49.23%`` and
  ``tokens per GPU (tokens/s/GPU)``; Primus' newer labels ``compute per GPU (TFLOP/s/GPU):
  X (avg Y)`` and ``tokens/s/GPU inst/harmonic mean: X/Y`` are taken from its source (the
  ``megatron.training_log`` patch; no captured log with them was found).

Lines may carry any prefix (torchrun ``[default0]:``, Primus ``[date][rank-63/64][INFO ]``,
ANSI colours) and be interleaved with other output: fields are found by name anywhere on a
line. Fields a line does not print are None; fields the kit does not model but that carry a
number (``load_balancing_loss``, ``num zeros``, ``params norm``…) are kept in ``other``.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from pocforge.stats import harmonic_mean, statistic

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_ITERATION = re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|(.*)$")
_TIMESTAMP = re.compile(r"\[(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?|\d{8} \d\d:\d\d:\d\d)\]")
_RANK = re.compile(r"\[default(\d+)\]:|\[rank-(\d+)/\d+\]|\[Rank (\d+)\]|^(\d+): ")
_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf"
_FIRST_NUM = re.compile(rf"^\s*({_NUM})", re.IGNORECASE)
_MEMORY = re.compile(
    rf"\[Rank (\d+)\] \(after (\d+) iterations\) memory \(MB\)"
    rf" \| allocated: ({_NUM}) \| max allocated: ({_NUM})"
    rf" \| reserved: ({_NUM}) \| max reserved: ({_NUM})"
)
# "  seq_length ...................................... 8192" (the arguments dump at start)
_ARGUMENT = re.compile(r"(?:^|\s)([a-z_][a-z0-9_]*) \.{3,} (\S.*?)\s*$")
_DEVICE_MEMORY = re.compile(rf"({_NUM})\s*GB/({_NUM})\s*GB/({_NUM})\s*GB/({_NUM})\s*%")

ELAPSED = ("elapsed time per iteration (ms)",)
TFLOPS = ("throughput per gpu (tflop/s/gpu)", "compute per gpu (tflop/s/gpu)")
TOKENS = ("tokens per gpu (tokens/s/gpu)", "tokens/s/gpu inst/harmonic mean")
MODELLED = {
    *ELAPSED,
    *TFLOPS,
    *TOKENS,
    "consumed samples",
    "global batch size",
    "learning rate",
    "lm loss",
    "loss scale",
    "grad norm",
    "number of skipped iterations",
    "number of nan iterations",
    "mem usages",
    "hip mem usage/free/total/usage_ratio",
    "rocm mem usage/free/total/usage_ratio",
}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class IterationRecord(_Model):
    """One ``iteration N/ M | …`` line; times and rates are Megatron's averages over the log
    interval (every iteration at ``--log-interval 1``)."""

    iteration: int
    train_iters: int = Field(description="M of 'iteration N/ M': --train-iters.")
    elapsed_ms: float = Field(description="Elapsed time per iteration (ms); Primus: this one.")
    tflops_per_gpu: float | None = Field(
        None, description="Megatron's model TFLOP/s per GPU, when the log prints it."
    )
    tokens_per_s_per_gpu: float | None = Field(
        None, description="Tokens per second per GPU, when the log prints it (Primus)."
    )
    global_batch_size: int
    consumed_samples: int | None = None
    learning_rate: float | None = None
    lm_loss: float | None = None
    loss_scale: float | None = None
    grad_norm: float | None = None
    skipped: int | None = Field(None, description="Number of skipped iterations (this interval).")
    nan: int | None = Field(None, description="Number of nan iterations (this interval).")
    device_memory_used_gb: float | None = Field(None, description="Primus hip/rocm mem usage.")
    device_memory_total_gb: float | None = None
    device_memory_fraction: float | None = Field(
        None, description="Used / total device memory (ROCm 'mem usages', Primus usage_ratio)."
    )
    timestamp: str | None = Field(None, description="As printed (no time zone).")
    rank: int | None = Field(None, description="Rank named by the line's prefix, if any.")
    line: int = Field(description="1-based line number in the log.")
    other: dict[str, float] = Field(
        default_factory=dict, description="Other numeric fields, by their printed name."
    )


class MemoryRecord(_Model):
    """``[Rank R] (after N iterations) memory (MB) | …``: torch's allocator statistics."""

    rank: int
    after_iterations: int
    allocated_mb: float
    max_allocated_mb: float
    reserved_mb: float
    max_reserved_mb: float
    line: int


class MegatronLog(_Model):
    source: str
    iterations: list[IterationRecord]
    memory: list[MemoryRecord] = Field(default_factory=list)
    arguments: dict[str, str] = Field(
        default_factory=dict, description="The 'name ..... value' arguments dump, if logged."
    )


class SteadyState(_Model):
    """Means over the logged iterations after warm-up."""

    warmup: int = Field(description="Iterations <= warmup were left out.")
    records: int = Field(description="Log lines averaged.")
    first_iteration: int
    last_iteration: int
    elapsed_ms: float = Field(description="Arithmetic mean of the lines' elapsed_ms.")
    tflops_per_gpu: float | None = Field(
        description="Harmonic mean of the lines' TFLOP/s/GPU: total work / total time."
    )
    tokens_per_s_per_gpu: float | None = Field(
        description="Harmonic mean of the lines' tokens/s/GPU (logged or derived)."
    )
    tokens_derived: bool = Field(
        False,
        description="tokens/s/GPU computed as global batch × seq length / world size / "
        "elapsed, the log printing none.",
    )


def _number(text: str) -> float | None:
    m = _FIRST_NUM.match(text)
    return float(m.group(1)) if m else None


def _fields(rest: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for piece in rest.split("|"):
        key, sep, value = piece.partition(":")
        if sep:
            out[" ".join(key.split()).lower()] = value.strip()
    return out


def _pick(fields: dict[str, str], names: tuple[str, ...]) -> float | None:
    for name in names:
        if name in fields:
            return _number(fields[name])
    return None


def _int(value: float | None) -> int | None:
    return None if value is None or math.isnan(value) else int(value)


def _rank(prefix: str) -> int | None:
    m = _RANK.search(prefix)
    return next((int(g) for g in m.groups() if g is not None), None) if m else None


def _record(line: str, m: re.Match[str], number: int, where: str) -> IterationRecord:
    fields = _fields(m.group(3))
    elapsed = _pick(fields, ELAPSED)
    gbs = _int(_pick(fields, ("global batch size",)))
    if elapsed is None or gbs is None:
        missing = "elapsed time per iteration (ms)" if elapsed is None else "global batch size"
        raise ValueError(f"{where}:{number}: Megatron iteration line without '{missing}'")
    used = total = fraction = None
    for name in ("hip mem usage/free/total/usage_ratio", "rocm mem usage/free/total/usage_ratio"):
        if name in fields and (mem := _DEVICE_MEMORY.search(fields[name])):
            used, total, fraction = (
                float(mem.group(1)),
                float(mem.group(3)),
                float(mem.group(4)) / 100,
            )
            break
    if fraction is None and "mem usages" in fields:
        fraction = _number(fields["mem usages"])
    prefix = line[: m.start()]
    stamp = _TIMESTAMP.search(prefix)
    other = {
        k: v for k, text in fields.items() if k not in MODELLED and (v := _number(text)) is not None
    }
    return IterationRecord(
        iteration=int(m.group(1)),
        train_iters=int(m.group(2)),
        elapsed_ms=elapsed,
        tflops_per_gpu=_pick(fields, TFLOPS),
        tokens_per_s_per_gpu=_pick(fields, TOKENS),
        global_batch_size=gbs,
        consumed_samples=_int(_pick(fields, ("consumed samples",))),
        learning_rate=_pick(fields, ("learning rate",)),
        lm_loss=_pick(fields, ("lm loss",)),
        loss_scale=_pick(fields, ("loss scale",)),
        grad_norm=_pick(fields, ("grad norm",)),
        skipped=_int(_pick(fields, ("number of skipped iterations",))),
        nan=_int(_pick(fields, ("number of nan iterations",))),
        device_memory_used_gb=used,
        device_memory_total_gb=total,
        device_memory_fraction=fraction,
        timestamp=stamp.group(1) if stamp else None,
        rank=_rank(prefix),
        line=number,
        other=other,
    )


def parse_text(text: str, source: str = "log") -> MegatronLog:
    """Every iteration line, memory report and logged argument of ``text``.

    Raises ValueError (one line, naming ``source``) when no iteration line is found, or when
    an iteration line lacks its elapsed time or global batch size — except a last line cut
    off mid-write (no newline at its end), which is left out.
    """
    iterations: list[IterationRecord] = []
    memory: list[MemoryRecord] = []
    arguments: dict[str, str] = {}
    lines = text.splitlines()
    for number, raw in enumerate(lines, 1):
        line = _ANSI.sub("", raw)
        if m := _ITERATION.search(line):
            try:
                iterations.append(_record(line, m, number, source))
            except ValueError:
                if number == len(lines) and not text.endswith(("\n", "\r")):
                    continue  # the writer was still writing this line
                raise
        elif m := _MEMORY.search(line):
            g = m.groups()
            memory.append(
                MemoryRecord(
                    rank=int(g[0]),
                    after_iterations=int(g[1]),
                    allocated_mb=float(g[2]),
                    max_allocated_mb=float(g[3]),
                    reserved_mb=float(g[4]),
                    max_reserved_mb=float(g[5]),
                    line=number,
                )
            )
        elif m := _ARGUMENT.search(line):
            arguments.setdefault(m.group(1), m.group(2))
    if not iterations:
        raise ValueError(
            f"{source}: no Megatron iteration lines "
            "('iteration N/ M | … | elapsed time per iteration (ms): …') found"
        )
    return MegatronLog(source=source, iterations=iterations, memory=memory, arguments=arguments)


def read_log(path: Path | str) -> MegatronLog:
    """:func:`parse_text` of a file (undecodable bytes replaced, not fatal)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ValueError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return parse_text(text, str(path))


def steady_state(
    records: list[IterationRecord],
    warmup: int,
    *,
    seq_length: int | None = None,
    world_size: int | None = None,
) -> SteadyState:
    """Mean iteration time and throughput of the records with ``iteration > warmup``.

    Each line weighs the same (its values are already means over its log interval, so with a
    constant ``--log-interval`` this is the mean over iterations). Rates are averaged
    harmonically: with the same work in every iteration (fixed global batch and sequence
    length), that is total work / total time, the throughput a run actually delivered.
    Without logged tokens/s/GPU, ``seq_length`` and ``world_size`` (the arguments dump's
    ``seq_length`` and ``world_size``) derive it from the global batch size and time.
    """
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, not {warmup}")
    kept = [r for r in records if r.iteration > warmup]
    if not kept:
        last = max((r.iteration for r in records), default=None)
        raise ValueError(
            f"no logged iteration after the {warmup} warm-up iterations (last logged: {last})"
        )
    tflops = [r.tflops_per_gpu for r in kept if r.tflops_per_gpu is not None]
    tokens = [r.tokens_per_s_per_gpu for r in kept if r.tokens_per_s_per_gpu is not None]
    derived = False
    if not tokens and seq_length and world_size:
        tokens = [
            r.global_batch_size * seq_length / world_size / (r.elapsed_ms / 1000.0) for r in kept
        ]
        derived = True
    return SteadyState(
        warmup=warmup,
        records=len(kept),
        first_iteration=kept[0].iteration,
        last_iteration=kept[-1].iteration,
        elapsed_ms=statistic(np.asarray([r.elapsed_ms for r in kept]), "mean"),
        tflops_per_gpu=harmonic_mean(tflops) if tflops else None,
        tokens_per_s_per_gpu=harmonic_mean(tokens) if tokens else None,
        tokens_derived=derived,
    )
