"""A POC's plan: the planner over its spec, the ranked layouts, the predictions for every
sweep point and the training run, and the chosen layout's launch through the framework's
own adapter. ``pocforge plan POC`` prints it; ``pocforge run`` writes it into the run as
``plan.json``, where the dashboard sets it beside what was measured.

It lives above the frameworks (not in :mod:`pocforge.plan`, which knows no spec) because
the launch of the chosen layout is the adapter's."""

from __future__ import annotations

from dataclasses import asdict

from pocforge.frameworks.disagg import placements
from pocforge.plan import ServingPoint, search_serving, search_training
from pocforge.plan.disagg import PREDICT_ASSUMPTIONS as DISAGG_ASSUMPTIONS
from pocforge.plan.disagg import predict_disaggregated
from pocforge.plan.hardware import CALIBRATION
from pocforge.plan.serving import ASSUMPTIONS as SERVING_ASSUMPTIONS
from pocforge.plan.training import ASSUMPTIONS as TRAINING_ASSUMPTIONS
from pocforge.runtimes import RuntimeSpecError
from pocforge.runtimes.plan import plan_deployment
from pocforge.spec import PocSpec
from pocforge.spec.planning import (
    device_of,
    facts_of,
    pool_spec,
    serving_layout,
    serving_model,
    shape_of,
    training_model,
    workload_points,
)

SCHEMA = "pocforge-plan/1"


class PlanError(ValueError):
    """The spec cannot be planned (one clear line naming the field to fix)."""


def plan_document(spec: PocSpec, gpus: int | None = None, top: int = 5) -> dict:
    """The plan of ``spec`` over ``gpus`` GPUs (default: its cluster's)."""
    shape = shape_of(spec)
    if shape is None:
        raise PlanError(
            f"{spec.source_file}: model.id {spec.model.id!r}: its architecture is not known "
            "(no config.json there, not in the catalog: `pocforge plan predict --model list`); "
            "add model.facts (layers, hidden, heads, kv_heads, intermediate, vocab)"
        )
    total = gpus or spec.cluster.total_gpus
    device = device_of(spec)
    doc: dict = {
        "schema": SCHEMA,
        "model": spec.model.id,
        "gpu": spec.cluster.gpu,
        "gpus": total,
        "params": shape.params,
        "active_params": shape.active_params,
        "facts": facts_of(spec).model_dump(exclude_none=True),
        "calibration": CALIBRATION.name,
    }
    if spec.serving is not None:
        doc["serving"] = _serving(spec, shape, device, total, top)
    if spec.training is not None:
        doc["training"] = _training(spec, shape, device, total, top, gpus)
        doc["training"]["criteria"] = _training_criteria(spec, doc["training"]["prediction"])
    return doc


# A training criterion's metric -> the prediction's field the planner can hold it to.
PREDICTED_TRAINING = {
    "mfu": "mfu",
    "tokens_per_s_per_gpu": "tokens_per_s_per_gpu",
    "tflops_per_gpu": "tflops_per_gpu",
}
_HOLDS = {"<=": lambda a, b: a <= b, "<": lambda a, b: a < b,
          ">=": lambda a, b: a >= b, ">": lambda a, b: a > b}  # fmt: skip


def _training_criteria(spec: PocSpec, prediction: dict) -> list[dict]:
    """Each training criterion the planner predicts (and the targets), held to the spec
    layout's prediction: the ones it misses are said before any GPU is used."""
    checks = [
        (str(c), PREDICTED_TRAINING[c.parts[1]], c.op, c.threshold)
        for c in spec.acceptance.criteria
        if c.parts[0] == "training" and len(c.parts) == 2 and c.parts[1] in PREDICTED_TRAINING
    ]
    targets = spec.training.targets if spec.training else None
    for name in ("mfu", "tokens_per_s_per_gpu"):
        value = getattr(targets, name, None) if targets else None
        if value is not None:
            checks.append((f"training.targets.{name} {value:g}", name, ">=", value))
    out = []
    for label, field, op, threshold in checks:
        predicted = prediction.get(field)
        if predicted is None:
            continue
        out.append({"criterion": label, "predicted": predicted,
                    "meets": bool(_HOLDS[op](predicted, threshold))})  # fmt: skip
    return out


def _serving(spec: PocSpec, shape, device, total: int, top: int) -> dict:
    serving = spec.serving
    assert serving is not None
    pools = _pools(spec, shape) if serving.disaggregation is not None else None
    own = pools["decode"][0] if pools else serving_model(spec, shape)
    workloads = []
    for workload in serving.workloads:
        wp = workload_points(spec, workload)
        points = [
            {"concurrency": p.concurrency, **_predict(own, pools, p, spec)} for p in wp.points
        ]
        widest = max(wp.points, key=lambda p: p.concurrency)
        found = search_serving(
            shape,
            device,
            total,
            ServingPoint(widest.isl, widest.osl, widest.concurrency),
            serving.framework,
            own.precision,
            own.kv_dtype,
            wp.slos,
            own.memory_fraction,
        )
        workloads.append(
            {
                "name": wp.name,
                "isl": widest.isl,
                "osl": widest.osl,
                "slos": asdict(wp.slos),
                "points": points,
                "ranked": [c.as_dict() for c in found.ranked[:top]],
                "rejected": [c.as_dict() for c in found.rejected],
                "launch": _launch(spec, found.best.layout) if found.best else None,
            }
        )
    out = {
        "framework": serving.framework,
        "precision": own.precision,
        "kv_dtype": own.kv_dtype,
        "layout": serving_layout(spec).label(),
        "memory": own.memory.as_dict(),
        "workloads": workloads,
        "assumptions": list(SERVING_ASSUMPTIONS),
    }
    if pools:
        out["layout"] = " : ".join(
            f"{role} {count}×{model.layout.label()}" for role, (model, count) in pools.items()
        )
        out["memory"] = {role: model.memory.as_dict() for role, (model, _) in pools.items()}
        out["assumptions"] += list(DISAGG_ASSUMPTIONS)
    return out


def _pools(spec: PocSpec, shape) -> dict:
    """Each pool of a disaggregated deployment: (one instance as a planner model, count)."""
    disagg = spec.serving.disaggregation
    return {
        role: (serving_model(pool_spec(spec, role), shape), getattr(disagg, role).instances)
        for role in ("prefill", "decode")
    }


def _predict(own, pools, point, spec: PocSpec) -> dict:
    """The deployment's prediction at ``point``: aggregated, or the P/D pair's."""
    if pools is None:
        return own.predict(point).as_dict()
    placed = placements(spec)
    nodes = {role: {n for p in placed if p.role == role for n in p.nodes} for role in pools}
    (prefill, p_count), (decode, d_count) = pools["prefill"], pools["decode"]
    across = nodes["prefill"] != nodes["decode"] or len(nodes["prefill"]) > 1
    return predict_disaggregated(prefill, p_count, decode, d_count, point, across).as_dict()


def _training(spec: PocSpec, shape, device, total: int, top: int, gpus_given: int | None) -> dict:
    model, point = training_model(spec, shape)
    world = model.layout.gpus if gpus_given is None else total
    found = search_training(shape, device, world, point, model.framework, model.precision)
    return {
        "framework": model.framework,
        "precision": model.precision,
        "seq_len": point.seq_len,
        "global_batch": point.global_batch,
        "prediction": model.predict(point).as_dict(),
        "ranked": [c.as_dict() for c in found.ranked[:top]],
        "rejected": [c.as_dict() for c in found.rejected[:top]],
        "launch": _training_launch(spec, found.best.layout, point.global_batch)
        if found.best
        else None,
        "assumptions": list(TRAINING_ASSUMPTIONS),
    }


def _training_launch(spec: PocSpec, layout, global_batch: int) -> list[str] | None:
    """The first node's training launch with ``layout`` (the global batch kept through
    gradient accumulation): Megatron's arguments for a Megatron spec or any layout with
    model parallelism (DeepSpeed runs data parallel only), else DeepSpeed's ZeRO stage and
    micro-batch."""
    from pocforge.spec.training_schema import MegatronLayout

    training = spec.training
    assert training is not None
    accum = max(1, global_batch // (layout.dp * layout.micro_batch))
    update: dict = {"micro_batch": layout.micro_batch, "grad_accum": accum}
    if training.framework == "megatron" or layout.tp * layout.pp * layout.cp > 1:
        before = training.megatron or MegatronLayout()
        update["framework"] = "megatron"
        update["megatron"] = before.model_copy(
            update={
                "tp": layout.tp,
                "pp": layout.pp,
                "cp": layout.cp,
                "ep": layout.ep,
                "vpp": layout.vpp if layout.vpp > 1 else None,
                "recompute": layout.recompute,
                "distributed_optimizer": layout.zero >= 1,
                "sequence_parallel": before.sequence_parallel and layout.tp > 1,
            }
        )
    else:
        update["zero_stage"] = layout.zero
    changed = training.model_copy(update=update)
    variant = spec.model_copy(update={"training": changed}, deep=False)
    return _first_node(variant, "training")[:1] or None


def _launch(spec: PocSpec, layout) -> list[str] | None:
    """The first node's launch of ``spec`` with ``layout`` as its parallelism, from the
    framework's adapter (None when the layout needs more than this spec's nodes, or the
    adapter refuses it: the plan still ranks it)."""
    serving = spec.serving
    assert serving is not None
    par = serving.parallelism.model_copy(
        update={
            "tp": layout.tp,
            "pp": layout.pp,
            "dp": layout.dp,
            "ep": layout.ep,
            "dp_attention": layout.dp_attention,
        }
    )
    # a ranked layout is an aggregated deployment, also for a disaggregated spec
    aggregated = serving.model_copy(update={"parallelism": par, "disaggregation": None})
    variant = spec.model_copy(update={"serving": aggregated}, deep=False)
    return _first_node(variant, "serving") or None


def _first_node(variant: PocSpec, deployment: str) -> list[str]:
    """Node 0's commands of ``deployment`` in its runtime; none when the runtime or the
    adapter refuses the variant (the plan still ranks its layout)."""
    from pocforge.frameworks import LaunchContext
    from pocforge.paths import workspace_root

    try:
        launches = plan_deployment(variant, deployment, LaunchContext.local(workspace_root()))
    except (ValueError, KeyError, RuntimeError, RuntimeSpecError):
        return []
    return [one.command() for one in launches if one.node_rank == 0]
