"""Where Megatron training starts from (``training.init``): the conversion launch that
turns a Hugging Face checkpoint into a Megatron-Core distributed checkpoint on every node,
and the arguments that load it.

Megatron-LM's own recipe (``docs/llama_mistral.md``, "Convert checkpoint format" and
"Launch model"): convert with Megatron-Bridge (``examples/conversion/convert_checkpoints.py
import --hf-model … --megatron-path …``), then train with ``--load <folder>
--exit-on-missing-checkpoint --no-load-optim --no-load-rng`` and the model's own tokenizer
(``--tokenizer-type HuggingFaceTokenizer --tokenizer-model``); ``--finetune`` starts the
iteration count at 0. A distributed checkpoint is saved once and loaded at any TP/PP.

On a ``cpu`` cluster the kit's importer (:mod:`pocforge.training.megatron_import`, the same
arguments) stands in for Megatron-Bridge, which needs Transformer Engine's CUDA build.
"""

from __future__ import annotations

import math
from pathlib import PurePosixPath

from pocforge.frameworks.base import model_path
from pocforge.spec import PocSpec

# Converted checkpoints on a GPU node, beside the kit's other node folders (HF_HOME's).
NODE_CHECKPOINTS = "/opt/pocforge/checkpoints"
# What Megatron's save_checkpoint writes last: a folder with it is a whole checkpoint.
TRACKER = "latest_checkpointed_iteration.txt"
MEGATRON_VOCAB_DIVISOR = 128  # megatron/training/arguments.py: --make-vocab-size-divisible-by


def init_source(spec: PocSpec) -> str:
    """The checkpoint training starts from, as the nodes name it."""
    init = spec.training.init  # type: ignore[union-attr]
    assert init is not None
    return model_path(spec) if init.checkpoint == "model" else init.checkpoint


def load_dir(spec: PocSpec) -> str | None:
    """The folder Megatron's ``--load`` reads: the converted checkpoint of a Hugging Face
    source (beside a local source on ``cpu``; under :data:`NODE_CHECKPOINTS` on GPU nodes),
    or the POC's own Megatron folder. None without ``training.init``."""
    training = spec.training
    if training is None or training.init is None:
        return None
    source = init_source(spec)
    if training.init.format == "megatron":
        return source
    suffix = f"-mcore-{training.dtype}"
    path = PurePosixPath(source)
    if spec.cluster.gpu == "cpu" and path.is_absolute():
        return str(path.parent / f"{path.name}{suffix}")
    return f"{NODE_CHECKPOINTS}/{source.strip('/').replace('/', '--')}{suffix}"


def converts(spec: PocSpec) -> bool:
    """Training starts from a Hugging Face checkpoint: every node converts it first."""
    training = spec.training
    return training is not None and training.init is not None and training.init.format == "hf"


def conversion_argv(spec: PocSpec, python: str) -> list[str] | None:
    """The command that writes :func:`load_dir` from a Hugging Face source (None when
    nothing is converted): Megatron-Bridge's importer on GPU nodes, the kit's on ``cpu``."""
    training = spec.training
    if not converts(spec):
        return None
    assert training is not None and training.init is not None
    args = [
        "import",
        "--hf-model", init_source(spec),
        "--megatron-path", str(load_dir(spec)),
        "--torch-dtype", training.dtype,
    ]  # fmt: skip
    if spec.cluster.gpu == "cpu":
        return [python, "-m", "pocforge.training.megatron_import", *args]
    script = f"{training.init.bridge_path.rstrip('/')}/examples/conversion/convert_checkpoints.py"
    return [python, script, *args]


def vocab_divisor(vocab: int | None, tp: int) -> int:
    """``--make-vocab-size-divisible-by`` so that a tokenizer of ``vocab`` tokens pads to
    exactly ``vocab`` (Megatron pads to a multiple of divisor × TP, and a checkpoint's
    embedding has the model's own size): the largest power of two up to Megatron's 128
    with divisor × TP dividing the vocabulary; 128 where none does."""
    if not vocab:
        return MEGATRON_VOCAB_DIVISOR
    for exponent in range(int(math.log2(MEGATRON_VOCAB_DIVISOR)), -1, -1):
        if vocab % (2**exponent * tp) == 0:
            return 2**exponent
    return MEGATRON_VOCAB_DIVISOR


def load_args(spec: PocSpec, vocab: int | None, tp: int) -> list[str]:
    """Megatron-LM's loading arguments for ``training.init`` ([] without it): the
    checkpoint, the model only (no optimizer, no RNG, iteration 0), and the model's own
    tokenizer, its vocabulary padded to the checkpoint's."""
    folder = load_dir(spec)
    if folder is None:
        return []
    args = [
        "--load", folder,
        "--exit-on-missing-checkpoint",
        "--no-load-optim",
        "--no-load-rng",
        "--finetune",
    ]  # fmt: skip
    divisor = vocab_divisor(vocab, tp)
    if divisor != MEGATRON_VOCAB_DIVISOR:
        args += ["--make-vocab-size-divisible-by", str(divisor)]
    return args


def tokenizer_model(spec: PocSpec) -> str:
    """The tokenizer of a run that starts from a checkpoint: the checkpoint's own (a
    Hugging Face source), else the POC's model's."""
    return init_source(spec) if converts(spec) else model_path(spec)
