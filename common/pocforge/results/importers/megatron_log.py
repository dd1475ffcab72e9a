"""Megatron-LM training logs -> a training result: NVIDIA Megatron-LM, ROCm/Megatron-LM,
AMD Primus (Megatron backend) and Megatron-Bridge, which print Megatron's ``training_log``
lines (``iteration N/ M | … | elapsed time per iteration (ms): … | …``).

The lines are read by the kit's own parser, :mod:`pocforge.training.megatron_log` (its
docstring lists every variant seen in real output; ``tests/data/megatron/``). From each
iteration line: the iteration, its elapsed time, ``lm loss``, the global batch size and,
where printed, ``throughput per GPU (TFLOP/s/GPU)`` (``--log-throughput``) and Primus'
``tokens per GPU (tokens/s/GPU)``. Megatron-Bridge prints its TFLOP/s on a line of its
own just before the iteration line it belongs to (``Step Time : 14.26s GPU utilization:
58.2TFLOP/s/GPU``, ``…MODEL_TFLOP/s/GPU`` in later releases;
``src/megatron/bridge/training/utils/train_utils.py``); such a line gives the next
iteration line its TFLOP/s when that line has none.

Options the log may not carry: the world size and sequence length are the arguments dump's
``world_size`` and ``seq_length`` when logged (``--gpus`` / ``--seq-len`` otherwise); the
dtype is ``fp8`` when the dump's ``fp8`` is set, else ``bfloat16`` / ``float16`` from
``bf16`` / ``fp16`` (``--dtype`` overrides). Warm-up: found by stability (the logged line
covering iteration 1, then leading lines off the steady pace:
:func:`~pocforge.results.importers.training.steady_start`); ``--warmup N`` leaves out
iterations <= N instead. One log per
import: a resumed run's logs are imported one at a time.
"""

from __future__ import annotations

import re
from pathlib import Path

from pocforge.results.importers.common import Imported, ResultImportError
from pocforge.results.importers.training import (
    LoggedStep,
    TrainingOptions,
    read_log_text,
    training_result,
    world_size,
)
from pocforge.results.stage_schema import DefinitionDifference
from pocforge.training.megatron_log import MegatronLog, parse_text

TOOL = "megatron-log"
WHAT = "a Megatron-LM training log"
_BRIDGE_STEP = re.compile(
    r"Step Time\s*:\s*([\d.]+)s\s+GPU utilization:\s*([\d.]+)\s*(?:MODEL_)?TFLOP/s/GPU"
)
DEFINITIONS = {
    "elapsed_ms": "Megatron's 'elapsed time per iteration (ms)': wall time of the log "
    "interval / its iterations, timed on the rank that prints (the last).",
    "tflops_per_gpu": "Megatron's 'throughput per GPU (TFLOP/s/GPU)': "
    "num_floating_point_operations(args, batch) / (elapsed × 10^12 × world size), its FLOP "
    "count from the model's shape (Megatron-Bridge: the interval's FLOPs / elapsed / world "
    "size, printed as 'GPU utilization').",
    "tokens_per_s_per_gpu": "Primus' 'tokens per GPU (tokens/s/GPU)' where printed, else "
    "global batch size × sequence length / world size / elapsed.",
    "lm_loss": "Megatron's 'lm loss': the mean over the interval's micro-batches.",
}
DIFFERENCES = [
    DefinitionDifference(
        metric="tflops_per_gpu",
        theirs="Megatron's num_floating_point_operations: its own attention, MoE and "
        "vocabulary terms, no recompute; Primus counted its own way until it adopted "
        "Megatron's (AMD-AGI/Primus pull request #462)",
        ours="6·N_active + 6·d·V + 12·L·d·T per token (pocforge.training.flops)",
        effect="TFLOP/s and MFU compare with other Megatron runs, not exactly with the "
        "kit's own: the two counts differ by the attention and head terms",
    ),
    DefinitionDifference(
        metric="*",
        theirs="each printed value is a mean over its log interval",
        ours="harmonic mean over the logged lines after warm-up",
        effect="with --log-interval 1 the same as per-step averaging; with longer "
        "intervals each interval weighs the same",
    ),
]


def _dtype(args: dict[str, str]) -> str | None:
    if args.get("fp8", "None") not in ("None", "False", ""):
        return "fp8"
    if args.get("bf16") == "True":
        return "bfloat16"
    if args.get("fp16") == "True":
        return "float16"
    return None


def _int_arg(args: dict[str, str], name: str) -> int | None:
    value = args.get(name, "")
    return int(value) if value.isdigit() else None


def logged_steps(log: MegatronLog, text: str) -> list[LoggedStep]:
    """The log's iteration lines as steps, Megatron-Bridge's ``Step Time`` TFLOP/s on the
    iteration line that follows it."""
    bridge: dict[int, float] = {}  # line -> TFLOP/s of the Step Time line
    for number, line in enumerate(text.splitlines(), 1):
        if m := _BRIDGE_STEP.search(line):
            bridge[number] = float(m.group(2))
    steps, previous = [], 0
    for r in log.iterations:
        before = [n for n in bridge if previous < n < r.line]
        tflops = r.tflops_per_gpu
        if tflops is None and before:
            tflops = bridge[max(before)]
        steps.append(
            LoggedStep(
                iteration=r.iteration,
                line=r.line,
                step_time_s=r.elapsed_ms / 1000.0,
                loss=r.lm_loss,
                tflops_per_gpu=tflops,
                tokens_per_s_per_gpu=r.tokens_per_s_per_gpu,
                global_batch_size=r.global_batch_size,
            )
        )
        previous = r.line
    return steps


def read(path: Path) -> tuple[MegatronLog, str]:
    text = read_log_text(path, WHAT)
    try:
        return parse_text(text, str(path)), text
    except ValueError as exc:
        from pocforge.results.importers.dgxc import NEMO_STEP

        if NEMO_STEP.search(text):
            raise ResultImportError(
                f"{path}: NeMo 2 step lines ('Training epoch E, iteration N/M | …'), not "
                "Megatron's: import it with --format dgxc"
            ) from None
        raise ResultImportError(str(exc)) from None


def options_from_log(path: Path, log: MegatronLog, options: TrainingOptions):
    """(world size, options with the log's sequence length and dtype filled in)."""
    args = log.arguments
    world = world_size(path, options, _int_arg(args, "world_size"))
    return world, TrainingOptions(
        gpus=world,
        gpu=options.gpu,
        dtype=options.dtype or _dtype(args),
        seq_len=options.seq_len or _int_arg(args, "seq_length"),
        warmup=options.warmup,
    )


def logged_options_notes(given: TrainingOptions, used: TrainingOptions) -> list[str]:
    """Which options came from the log's arguments dump rather than the command line."""
    found = [
        f"{name} {getattr(used, attr)}"
        for name, attr in (
            ("world size", "gpus"),
            ("sequence length", "seq_len"),
            ("dtype", "dtype"),
        )
        if getattr(used, attr) is not None and getattr(given, attr) is None
    ]
    return [f"from the log's arguments dump: {', '.join(found)}"] if found else []


def peak_memory_gb(log: MegatronLog) -> float | None:
    """Max allocated of the memory reports: Megatron prints MiB (bytes / 2^20)."""
    if not log.memory:
        return None
    return max(m.max_allocated_mb for m in log.memory) * 2**20 / 1e9


def parse(paths: list[Path], workload: str, gpus: int | None = None, **options) -> Imported:
    if len(paths) != 1:
        raise ResultImportError(f"{TOOL} imports one log per run, not {len(paths)} files")
    path = paths[0]
    log, text = read(path)
    given = TrainingOptions(gpus=gpus, **options)
    world, opts = options_from_log(path, log, given)
    notes = logged_options_notes(given, opts)
    result = training_result(
        path,
        logged_steps(log, text),
        tool=TOOL,
        framework="megatron",
        world=world,
        options=opts,
        warmup=given.warmup,  # None: found by stability
        peak_memory_gb=peak_memory_gb(log),
        definitions=DEFINITIONS,
        differences=DIFFERENCES,
        notes=notes,
    )
    return Imported(tool=TOOL, training=result)
