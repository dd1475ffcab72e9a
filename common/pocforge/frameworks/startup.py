"""How long a framework may take to come up, and a training run to finish, from the model's size.

One formula for every waiter (``pocforge launch``, the runner, the cluster workload, the
training stage), so a 700 GB checkpoint is not cut off at the wait a 1 GB one needs::

    startup  = weights bytes / LOAD_GBPS + COMPILE_S
    training = startup + steps × (6 × parameters × tokens per step and GPU / (TRAIN_FLOOR × peak)
                                  + STEP_OVERHEAD_S)

- weights bytes: the weight files of the model folder when it is on this machine, else
  parameters (estimated from the model facts, :func:`estimate_parameters`) × bytes per
  parameter of the quantization, or of the dtype when unquantized (:data:`BYTES`);
- ``LOAD_GBPS`` = 1 GB/s per node: every node reads (nearly) the whole checkpoint, since a
  tensor-parallel rank touches a slice of every tensor; local NVMe and the page cache are
  faster, a network file system or a first read from object storage often is not;
- ``COMPILE_S`` = 300 s: CUDA/HIP graph capture, torch.compile and Triton JIT at server
  start; DeepSpeed's C++ op builds (about 2.5 min for the shared-memory op on a CPU);
- a training step is bounded at ``TRAIN_FLOOR`` = 5 % of the GPU's dense bf16 peak (a run
  slower than that is broken, not slow) plus ``STEP_OVERHEAD_S`` for the optimizer and
  communication; a CPU counts ``CPU_TFLOPS``.

``serving.startup_timeout_s`` and ``training.timeout_s`` in the spec replace the derived
values.
"""

from __future__ import annotations

import math
from pathlib import Path

from pocforge.catalog import ModelFacts, gpu
from pocforge.frameworks.base import model_path
from pocforge.plan import Shape, ShapeError
from pocforge.spec import PocSpec
from pocforge.spec.planning import facts_of  # the facts the rules judge the spec by

LOAD_GBPS = 1.0
COMPILE_S = 300.0
UNKNOWN_SIZE_S = 900.0  # when neither the weights nor the facts tell the size
TRAIN_FLOOR = 0.05
STEP_OVERHEAD_S = 10.0
CPU_TFLOPS = 0.05
# Bytes per parameter: a quantization's storage, else the dtype's ("auto" is read as the
# bf16 most checkpoints ship in). 4-bit formats are 0.5 plus small per-group scales.
BYTES: dict[str, float] = {
    "float32": 4,
    "bfloat16": 2,
    "float16": 2,
    "auto": 2,
    "fp8": 1,
    "fp8_block": 1,
    "int8": 1,
    "awq": 0.5,
    "gptq": 0.5,
    "mxfp4": 0.5,
}
WEIGHT_FILES = ("*.safetensors", "*.bin", "*.pt", "*.pth")


def estimate_parameters(facts: ModelFacts) -> int | None:
    """Parameters of a decoder-only transformer from its facts, by the planner's count
    (:class:`pocforge.plan.Shape`: attention, dense and expert MLPs, shared experts,
    embedding and head); None when the facts cannot size it. Exact for Llama (the kit's
    tiny model: 721,536)."""
    try:
        return Shape(facts).params
    except ShapeError:
        return None


def weights_bytes(spec: PocSpec, dtype: str | None = None) -> float | None:
    """Bytes of the model's weights: its files when the folder is here, else estimated
    from the facts in ``dtype`` (default: the model's) or its quantization; None unknown."""
    if spec.model.tiny is not None:
        return 0.0  # the kit's tiny model: a few MB
    folder = Path(model_path(spec))
    if folder.is_dir():
        found = [f for pattern in WEIGHT_FILES for f in folder.glob(pattern)]
        if found:
            return float(sum(f.stat().st_size for f in found))
    parameters = estimate_parameters(facts_of(spec))
    if parameters is None:
        return None
    quantized = spec.model.quantization != "none" and dtype is None
    return parameters * BYTES[spec.model.quantization if quantized else dtype or spec.model.dtype]


def _startup(size: float | None) -> float:
    if size is None:
        return UNKNOWN_SIZE_S
    return math.ceil(size / (LOAD_GBPS * 1e9) + COMPILE_S)


def startup_timeout_s(spec: PocSpec) -> float:
    """Seconds a serving deployment may take to answer its health URL."""
    if spec.serving is not None and spec.serving.startup_timeout_s is not None:
        return spec.serving.startup_timeout_s
    return _startup(weights_bytes(spec))


def training_timeout_s(spec: PocSpec) -> float:
    """Seconds the training run (start, every step, the summary) may take."""
    training = spec.training
    if training is None:
        raise ValueError(f"{spec.name} has no training section")
    if training.timeout_s is not None:
        return training.timeout_s
    startup = _startup(weights_bytes(spec, training.dtype))
    parameters = estimate_parameters(facts_of(spec)) or 0  # unknown: the overhead bounds a step
    tokens = training.micro_batch * training.grad_accum * training.seq_len  # per GPU and step
    card = gpu(spec.cluster.gpu)
    tflops = TRAIN_FLOOR * card.bf16_tflops if card.is_gpu else CPU_TFLOPS
    step = 6 * parameters * tokens / (tflops * 1e12) + STEP_OVERHEAD_S
    return math.ceil(startup + training.steps * step)
