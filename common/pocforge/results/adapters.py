"""The stages' own outputs as the documents of :mod:`pocforge.results.schema`: one adapter each.

Every stage writes its native output (the serving sweep's ``summary.json``, the training
driver's ``summary.json``, the kernel bench's JSON) and the run reads its results through
these functions only, so a stage's result has one conversion, here.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from pocforge.bench.summary import Summary
from pocforge.results.base import SchemaError
from pocforge.results.stage_schema import (
    KernelResults,
    KernelRow,
    ServingPoint,
    ServingResult,
    TrainingResult,
    TrainingStep,
)
from pocforge.training.summary import TrainingSummary


def from_bench_summary(
    data: dict[str, Any], workload: str, source: str | None = None
) -> ServingResult:
    """The serving benchmark's ``summary.json`` (validated with its own model)."""
    try:
        summary = Summary.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise SchemaError(f"{source or 'summary.json'}: {loc}: {first['msg']}") from None
    gpus = int(summary.config.get("gpus") or 1)
    points = []
    for p in summary.points:
        metrics: dict[str, dict[str, float | None]] = {}
        ci: dict[str, dict[str, tuple[float, float]]] = {}
        per_repeat: dict[str, list[float]] = {}
        for name, stats in p.aggregate.items():
            metrics[name] = {stat: agg.mean for stat, agg in stats.items()}
            for stat, agg in stats.items():
                if agg.ci95_low is not None and agg.ci95_high is not None:
                    ci.setdefault(name, {})[stat] = (agg.ci95_low, agg.ci95_high)
            if "value" in stats:
                per_repeat[name] = list(stats["value"].values)
        ok = [r for r in p.repeats if r.status == "ok"]
        caveats = sorted({reason for r in p.repeats for reason in r.client.reasons})
        if p.error:
            caveats.append(p.error)
        caveats += p.notes
        points.append(
            ServingPoint(
                id=p.id,
                mode=p.mode,
                value=p.value,
                status=p.status,
                requests=sum(r.completed for r in p.repeats),
                failed=sum(r.failed for r in p.repeats),
                repeats=len(ok) or len(p.repeats),
                duration_s=sum(r.duration_s for r in ok) / len(ok) if ok else None,
                metrics=metrics,
                ci=ci,
                per_repeat=per_repeat,
                client_limited=p.client_limited,
                caveats=caveats,
                records_file=p.records_file,
                telemetry_file=p.telemetry_file,
            )
        )
    definitions = {k: v.definition for k, v in summary.definitions.items()}
    notes = [f"{k}: {v}" for k, v in summary.definition_notes.items()]
    if summary.status != "complete":
        notes.insert(0, f"the sweep's status is {summary.status}")
    return ServingResult(
        workload=workload,
        tool="pocforge",
        tool_version=summary.environment.pocforge_version,
        source_file=source,
        model=summary.config.get("model"),
        gpus=gpus,
        points=points,
        definitions=definitions,
        notes=notes,
    )


def from_training_summary(summary: TrainingSummary) -> TrainingResult:
    """The training benchmark's summary (DeepSpeed or another driver of the kit)."""
    return TrainingResult(
        framework=summary.framework,
        world_size=summary.world_size,
        gpu=summary.device,
        dtype=summary.dtype,
        warmup_steps=summary.warmup_steps,
        steps=[
            TrainingStep(
                step=s.step,
                loss=s.loss,
                step_time_s=s.seconds,
                tokens=summary.tokens_per_step,
                ended_unix_s=s.ended_unix_s,
            )
            for s in summary.loss_curve
        ],
        tokens_per_s_per_gpu=summary.tokens_per_s_per_gpu,
        tflops_per_gpu=summary.tflops_per_gpu,
        mfu=summary.mfu,
        peak_memory_gb=summary.peak_memory_gb,
        final_loss=summary.final_loss,
        notes=[f"warning: {w}" for w in summary.warnings],
    )


def from_kernel_bench(bench: dict[str, Any]) -> KernelResults:
    """The kernel bench's JSON (``python -m pocforge_kernels.bench --json``): one row per
    op and shape, its dimensions as the bench's ``dims`` mapping."""
    meta = bench["metadata"]
    rows = []
    for row in bench["rows"]:
        median_ms, vs_torch = row.get("median_ms"), row.get("vs_torch")
        rows.append(
            KernelRow(
                op=row["op"],
                shape={k: int(v) for k, v in row.get("dims", {}).items()},
                dtype=meta["dtype"],
                time_us=median_ms * 1000 if median_ms is not None else None,
                reference_time_us=median_ms * vs_torch * 1000
                if median_ms is not None and vs_torch is not None
                else None,
                bound=row.get("bound"),
                pct_roofline=row.get("roofline_pct"),
                speedup_vs_reference=vs_torch,
                speedup_vs_peers={
                    name: peer["speedup"]
                    for name, peer in row.get("peers", {}).items()
                    if "speedup" in peer
                },
                max_rel_error=row.get("rel_error"),
                ok=bool(row.get("correct")),
            )
        )
    return KernelResults(
        gpu=meta.get("catalog_entry"), arch=meta.get("arch"), timed=bench["timed"], rows=rows
    )
