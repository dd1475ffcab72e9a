"""NVIDIA dgxc-benchmarking training logs (a pretrain recipe's ``log-*.out``) -> a training
result, read as dgxc-benchmarking's own parser reads them
(``cli/llmb-run/src/llmb_run/pretrain_log_parser.py``, commit 841f546) in its two forms:

- **NeMo 2** recipes (``nemo2``), PyTorch Lightning's progress lines, one per step::

    Training epoch 0, iteration 9/29 | lr: 5.988e-06 | global_batch_size: 512 |
    global_step: 9 | max_memory_reserved: … | max_memory_allocated: 53930270720 |
    reduced_train_loss: 10.1 | train_step_timing in s: 27.88 | consumed_samples: 5120 |
    TFLOPS_per_GPU: 85.8

  (one line; the fields' order varies between releases; Slurm may prefix ``0: ``).
  A step is its ``global_step`` (the iteration counts within an epoch and starts again
  at 0 in the next); ``max_memory_allocated`` is in bytes.
- **Megatron-Bridge** recipes (``megatron_bridge``): Megatron's iteration lines and
  Bridge's ``Step Time : …s GPU utilization: …MODEL_TFLOP/s/GPU``, read as the
  ``megatron-log`` importer reads them.

dgxc-benchmarking averages iterations 35–44 of its 50-step runs (``MIN_ITERATION``,
``MAX_ITERATION``: "to skip warmup (input prefetch, activation allocation, JIT
compilation)"); so does this importer, unless ``--warmup N`` is given, which averages every
iteration after N instead (for runs of other lengths). The NeMo lines print neither the
sequence length nor the world size: ``--seq-len`` (for tokens/s/GPU, the recipes'
``(sequence length) × (global batch size) / (s/iter)``) and ``--gpus`` say them.
"""

from __future__ import annotations

import re
from pathlib import Path

from pocforge.results.importers import megatron_log
from pocforge.results.importers.common import Imported, ResultImportError
from pocforge.results.importers.training import (
    LoggedStep,
    TrainingOptions,
    read_log_text,
    training_result,
    world_size,
)
from pocforge.results.stage_schema import DefinitionDifference

TOOL = "dgxc"
WINDOW = (35, 44)  # llmb_run.pretrain_log_parser.MIN_ITERATION, MAX_ITERATION
WHAT = "a dgxc-benchmarking training log"
NEMO_STEP = re.compile(r"Training epoch (\d+), iteration (\d+)\s*/\s*(\d+)\s*\|(.*)$", re.MULTILINE)
_MEGATRON = re.compile(r"\biteration\s+\d+\s*/\s*\d+\s*\|")
_NUM = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf)", re.IGNORECASE)
STEP_TIME = "train_step_timing in s"
DEFINITIONS = {
    "train_step_timing": "NeMo 2: seconds of the training step (all micro-batches), NeMo's "
    "timing callback on the rank that logs.",
    "TFLOPS_per_GPU": "NeMo 2: the FLOPs callback's model FLOPs of the step (a formula per "
    "model family, nemo.utils.flops_formulas) / step time / GPUs. Megatron-Bridge: "
    "MODEL_TFLOP/s/GPU, the log interval's FLOPs / elapsed / world size.",
    "reduced_train_loss": "NeMo 2: the step's loss averaged over micro-batches and "
    "data-parallel ranks.",
    "tokens_per_s_per_gpu": "sequence length × global batch size / step time / GPUs (the "
    "recipes' README formula), with --seq-len and --gpus.",
}
DIFFERENCES = [
    DefinitionDifference(
        metric="*",
        theirs="llmb-run reports the arithmetic means of step time and TFLOP/s over "
        "iterations 35–44",
        ours="harmonic means of the per-step rates over the same iterations",
        effect="ours is total work / total time: at or below their mean TFLOP/s, equal "
        "when every step takes as long",
    ),
    DefinitionDifference(
        metric="tflops_per_gpu",
        theirs="NeMo's FLOPs callback or Megatron-Bridge's FLOP count (the framework's own "
        "formula per model family)",
        ours="6·N_active + 6·d·V + 12·L·d·T per token (pocforge.training.flops)",
        effect="TFLOP/s and MFU compare with other runs of the same recipes, not exactly "
        "with the kit's own",
    ),
]


def _fields(rest: str) -> dict[str, str]:
    out = {}
    for piece in rest.split("|"):
        key, sep, value = piece.partition(":")
        if sep:
            out[" ".join(key.split())] = value.strip()
    return out


def _number(fields: dict[str, str], name: str) -> float | None:
    m = _NUM.match(fields.get(name, ""))
    return float(m.group(1)) if m else None


def nemo_steps(text: str, path: Path) -> tuple[list[LoggedStep], float | None]:
    """NeMo 2's step lines and the peak ``max_memory_allocated`` (GB); a line without its
    step time is an error, except a last line cut off mid-write, which is left out."""
    steps, memory = [], []
    lines = text.splitlines()
    for number, line in enumerate(lines, 1):
        if not (m := NEMO_STEP.search(line)):
            continue
        fields = _fields(m.group(4))
        seconds = _number(fields, STEP_TIME)
        if seconds is None:
            if number == len(lines) and not text.endswith(("\n", "\r")):
                continue  # the writer was still writing this line
            raise ResultImportError(f"{path}:{number}: NeMo step line without '{STEP_TIME}'")
        gbs = _number(fields, "global_batch_size")
        if (allocated := _number(fields, "max_memory_allocated")) is not None:
            memory.append(allocated / 1e9)
        # the step is the run's global_step: NeMo's "iteration N/M" counts within an epoch
        # (two epochs would give 0, 10, 7, 8, 10), PyTorch Lightning's global_step does not
        step = _number(fields, "global_step")
        if step is None and int(m.group(1)) > 0:
            raise ResultImportError(
                f"{path}:{number}: a step of epoch {m.group(1)} without 'global_step': its "
                "place in the run is unknown (the iteration counts within the epoch)"
            )
        steps.append(
            LoggedStep(
                iteration=int(step) if step is not None else int(m.group(2)),
                line=number,
                step_time_s=seconds,
                loss=_number(fields, "reduced_train_loss"),
                tflops_per_gpu=_number(fields, "TFLOPS_per_GPU"),
                global_batch_size=int(gbs) if gbs is not None else None,
            )
        )
    return steps, max(memory) if memory else None


def parse(paths: list[Path], workload: str, gpus: int | None = None, **options) -> Imported:
    if len(paths) != 1:
        raise ResultImportError(f"{TOOL} imports one log per run, not {len(paths)} files")
    path = paths[0]
    given = TrainingOptions(gpus=gpus, **options)
    text = read_log_text(path, WHAT)
    steps, memory = nemo_steps(text, path)
    notes: list[str] = []
    if not steps and NEMO_STEP.search(text):
        raise ResultImportError(
            f"{path}: no complete NeMo step line ('… | {STEP_TIME}: …'): truncated?"
        )
    if steps:
        framework, world, opts = "nemo", world_size(path, given, None), given
        notes.append("NeMo 2 recipe log (dgxc-benchmarking's nemo2 parser)")
    elif _MEGATRON.search(text):
        log, _ = megatron_log.read(path)
        world, opts = megatron_log.options_from_log(path, log, given)
        steps, memory = megatron_log.logged_steps(log, text), megatron_log.peak_memory_gb(log)
        framework = "megatron-bridge"
        notes.append("Megatron-Bridge recipe log (dgxc-benchmarking's megatron_bridge parser)")
        notes += megatron_log.logged_options_notes(given, opts)
    else:
        raise ResultImportError(
            f"{path}: no NeMo ('Training epoch E, iteration N/M | … | {STEP_TIME}: …') or "
            "Megatron ('iteration N/ M | … | elapsed time per iteration (ms): …') step "
            f"lines: not {WHAT}"
        )
    if given.warmup is None:
        warmup, last = WINDOW[0] - 1, WINDOW[1]
    else:
        warmup, last = given.warmup, None
    result = training_result(
        path,
        steps,
        tool=TOOL,
        framework=framework,
        world=world,
        options=opts,
        warmup=warmup,
        last=last,
        peak_memory_gb=memory,
        definitions=DEFINITIONS,
        differences=DIFFERENCES,
        notes=notes,
    )
    return Imported(tool=TOOL, training=result)
