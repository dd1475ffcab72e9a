"""A Megatron run's ``summary.json``, read from its log: the same ``TrainingSummary`` as a
DeepSpeed run, so criteria, the dashboard and comparisons treat both alike.

Megatron prints its iterations from the last rank (``print_rank_last``), so the node that
holds the last rank writes the summary. Throughput and TFLOP/s use the kit's own
definitions (``training.flops``: the same FLOPs per token as a DeepSpeed run); Megatron's
own TFLOP/s (its ``num_floating_point_operations``, which counts attention and recompute
its way) is kept beside them in ``reported``. The parameter counts are the built model's
(the CPU driver's ``driver.json``) or, on GPU nodes running ``pretrain_gpt.py``, the
model's shape from its facts.
"""

from __future__ import annotations

import json
from pathlib import Path

from pocforge.catalog import gpu
from pocforge.frameworks.megatron import data_parallel, layout_of, profiled_iterations
from pocforge.plan.shape import Shape
from pocforge.spec import PocSpec
from pocforge.spec.planning import facts_of
from pocforge.training.flops import flops_per_token
from pocforge.training.megatron_log import MegatronLog, parse_text, steady_state
from pocforge.training.summary import StepRecord, TrainingSummary, definitions

DRIVER_FACTS = "driver.json"


def read_iterations(log_text: str) -> MegatronLog | None:
    """The run's log parsed, or None when it holds no iteration (a node without the last
    rank, or a run that stopped before its first iteration)."""
    try:
        log = parse_text(log_text)
    except ValueError:
        return None
    return log if log.iterations else None


def megatron_summary(
    spec: PocSpec, log: MegatronLog, driver_facts: dict | None, status: str
) -> TrainingSummary:
    """The summary of ``spec``'s Megatron run from its parsed log (``read_iterations``);
    the warm-up iterations are left out of every rate (``ValueError`` when none is left)."""
    training = spec.training
    assert training is not None
    layout = layout_of(spec)
    world = training.world_size or spec.cluster.total_gpus
    facts = facts_of(spec)
    if driver_facts:
        total, active = driver_facts["parameters"], driver_facts["active_parameters"]
    else:
        shape = Shape(facts)
        total, active = shape.params, shape.matmul_params - shape.head_params
    hidden, vocab, layers = facts.hidden, facts.vocab, facts.layers
    fpt = flops_per_token(active, hidden or 0, vocab or 0, layers or 0, training.seq_len)
    global_batch = training.micro_batch * training.grad_accum * data_parallel(spec)
    tokens_per_step = global_batch * training.seq_len
    records = [
        StepRecord(step=r.iteration - 1, loss=r.lm_loss, seconds=r.elapsed_ms / 1000.0)
        for r in log.iterations
        if r.lm_loss is not None
    ]
    # the profiled iterations run under the profiler's overhead: in the loss curve, not the rates
    profiled = profiled_iterations(training.profile.steps) if training.profile else range(0)
    timed = [r for r in log.iterations if r.iteration not in profiled] or log.iterations
    steady = steady_state(timed, training.warmup_steps)
    step_s = steady.elapsed_ms / 1000.0
    tps = tokens_per_step / step_s if step_s else None
    tflops = tps * fpt / world / 1e12 if tps else None
    peak = gpu(spec.cluster.gpu).dense_tflops("fp8" if layout.fp8 else training.dtype)
    memory, kind = None, "device_allocated"
    if driver_facts:
        memory, kind = driver_facts["peak_memory_gb"], driver_facts["peak_memory_kind"]
    elif log.memory:
        # Megatron's "memory (MB)" is bytes / 2**20
        memory = max(m.max_allocated_mb for m in log.memory) * 2**20 / 1e9
    reported = {"elapsed_ms": steady.elapsed_ms}
    if steady.tflops_per_gpu is not None:
        reported["tflops_per_gpu"] = steady.tflops_per_gpu
    tail = records[-3:]
    return TrainingSummary(
        status=status,
        framework="megatron",
        framework_version=(driver_facts or {}).get("framework_version")
        or (f"megatron-lm {training.version}" if training.version else "unknown"),
        torch_version=(driver_facts or {}).get("torch_version", "unknown"),
        device=spec.cluster.gpu,
        world_size=world,
        parallel={
            "tp": layout.tp,
            "pp": layout.pp,
            "cp": layout.cp,
            "dp": data_parallel(spec),
            "ep": layout.ep,
            "vpp": layout.vpp,
            "sequence_parallel": layout.sequence_parallel,
            "recompute": layout.recompute,
            "distributed_optimizer": layout.distributed_optimizer,
            "fp8": layout.fp8,
        },
        dtype=training.dtype,
        micro_batch=training.micro_batch,
        grad_accum=training.grad_accum,
        seq_len=training.seq_len,
        steps=len(records),
        warmup_steps=training.warmup_steps,
        parameters=total,
        active_parameters=active,
        flops_per_token=fpt,
        tokens_per_step=tokens_per_step,
        tokens_per_s=tps,
        tokens_per_s_per_gpu=tps / world if tps else None,
        tflops_per_gpu=tflops,
        peak_tflops=peak,
        mfu=tflops / peak if tflops and peak else None,
        peak_memory_gb=memory,
        peak_memory_kind=kind,
        final_loss=sum(r.loss for r in tail) / len(tail) if tail else None,
        loss_curve=records,
        reported=reported,
        definitions=definitions(),
    )


def read_driver_facts(out_dir: Path) -> dict | None:
    path = out_dir / DRIVER_FACTS
    return json.loads(path.read_text()) if path.is_file() else None
