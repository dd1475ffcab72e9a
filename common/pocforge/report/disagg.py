"""The dashboard's "disaggregated serving" part of a serving workload: the spec's prefill
and decode pools, and per sweep point what the servers' counters say the split cost.

A request behind the kit's P/D router is two steps: its prefill on a prefill instance
(``prefill_ms``, request to the prefill pool's one-token answer) and its decode request,
whose first byte comes after the KV transfer and the first decode step
(``transfer_decode_ms``). Both are the router's own means over the repeat
(:data:`pocforge.bench.promscrape.SERVER_METRICS`; definitions in :mod:`pocforge.metrics`),
so beside them stands the client's mean TTFT: what is left is the router, the network and
the client. ``kv_transfer_share`` says how much of the prompt the decode pool took from
transferred KV rather than computing it again; ``kv_transfer_failures`` counts the requests
whose prefill or decode step failed at the router. Nothing is shown that was not measured:
no row for a point without these figures, no column for a figure no point has.

The pools are named as InferenceX-style layouts, ``P:D <prefill>:<decode>`` by instances,
each pool ``instances × layout`` (``1×TP8 EP8``), so a Pareto curve of this run reads
beside an aggregated baseline of the same model on the same GPU count.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from pocforge.results.stage_schema import ServingPoint, ServingResult
from pocforge.spec.disagg import Disaggregation, Pool

# The split, in the order the table shows it; scalars ("value") of each repeat.
SPLIT_METRICS = (
    "prefill_ms",
    "transfer_decode_ms",
    "kv_transfer_share",
    "kv_transfer_failures",
    "kv_transfer_mb_per_request",
)


def disaggregation(spec: dict[str, Any] | None) -> Disaggregation | None:
    """The spec's ``serving.disaggregation``; None for an aggregated deployment (or a spec
    written by a kit whose pools this one cannot read)."""
    block = ((spec or {}).get("serving") or {}).get("disaggregation")
    if not block:
        return None
    try:
        return Disaggregation.model_validate(block)
    except ValidationError:
        return None


def layout(par: Pool | dict[str, Any]) -> str:
    """One instance's layout, ``TP8``, ``TP4 DP2``, ``TP8 DP8 EP8`` (``DP-attention``
    when attention is data parallel inside the TP group); of a pool, or of an aggregated
    deployment's ``serving.parallelism``."""
    sizes = par if isinstance(par, dict) else par.model_dump()
    parts = [f"TP{sizes.get('tp') or 1}"]
    for name in ("pp", "dp", "ep"):
        if (sizes.get(name) or 1) > 1:
            parts.append(f"{name.upper()}{sizes[name]}")
    if sizes.get("dp_attention"):
        parts.append("DP-attention")
    return " ".join(parts)


def ratio(disagg: Disaggregation) -> str:
    """``P:D 1:1``: prefill instances to decode instances."""
    return f"P:D {disagg.prefill.instances}:{disagg.decode.instances}"


def label(disagg: Disaggregation, _: Callable[[str], str]) -> str:
    """``P:D 1:1 (prefill 1×TP1, decode 1×TP1)``: the name of this deployment's curve."""
    return _("{ratio} (prefill {prefill}, decode {decode})").format(
        ratio=ratio(disagg),
        prefill=f"{disagg.prefill.instances}×{layout(disagg.prefill)}",
        decode=f"{disagg.decode.instances}×{layout(disagg.decode)}",
    )


def aggregated_label(spec: dict[str, Any] | None, _: Callable[[str], str]) -> str:
    """``aggregated (1×TP1 DP2)``: replicas × layout of an aggregated deployment."""
    serving = (spec or {}).get("serving") or {}
    par = serving.get("parallelism") or {}
    return _("aggregated ({layout})").format(layout=f"{serving.get('replicas', 1)}×{layout(par)}")


def deployment_label(spec: dict[str, Any] | None, _: Callable[[str], str]) -> str:
    """The P:D label of a disaggregated deployment, else its aggregated layout."""
    disagg = disaggregation(spec)
    return label(disagg, _) if disagg is not None else aggregated_label(spec, _)


def pools(disagg: Disaggregation) -> list[dict[str, Any]]:
    """One row per pool: instances × layout, GPUs of one instance, GPUs of the pool."""
    return [
        {
            "role": role,
            "instances": pool.instances,
            "layout": f"{pool.instances}×{layout(pool)}",
            "gpus_per_instance": pool.gpus,
            "gpus": pool.gpus * pool.instances,
        }
        for role, pool in (("prefill", disagg.prefill), ("decode", disagg.decode))
    ]


def _value(point: ServingPoint, metric: str) -> float | None:
    return point.metrics.get(metric, {}).get("value")


def measured(result: ServingResult) -> list[str]:
    """The split's metrics some point of the workload has, in :data:`SPLIT_METRICS` order."""
    return [m for m in SPLIT_METRICS if any(_value(p, m) is not None for p in result.points)]


def rows(result: ServingResult) -> list[dict[str, Any]]:
    """One row per point that has any of the split's metrics: each metric's mean over the
    repeats (its 95% interval where the repeats give one), failures summed over them, the
    client's mean and median TTFT, and what the router's two steps leave of the client's
    mean TTFT (router, network, client)."""
    out = []
    for p in result.points:
        values = {m: _value(p, m) for m in SPLIT_METRICS}
        if all(v is None for v in values.values()):
            continue
        if values["kv_transfer_failures"] is not None:  # a count: the repeats' total
            total = p.per_repeat.get("kv_transfer_failures") or [
                values["kv_transfer_failures"] * p.repeats
            ]
            values["kv_transfer_failures"] = round(sum(total))
        ttft = p.metrics.get("ttft_ms", {})
        steps = (values["prefill_ms"], values["transfer_decode_ms"])
        mean = ttft.get("mean")
        rest = mean - sum(steps) if mean is not None and None not in steps else None
        out.append(
            {
                "id": p.id,
                "repeats": p.repeats,
                **values,
                "ci": {m: p.ci[m]["value"] for m in SPLIT_METRICS if "value" in p.ci.get(m, {})},
                "ttft_mean": mean,
                "ttft_p50": ttft.get("p50"),
                "rest_ms": rest,
            }
        )
    return out


def model_name(spec: dict[str, Any] | None, result: ServingResult) -> str | None:
    """The model a sweep served, for matching runs: the spec's model id (its last path
    part: a local folder and a hub id name one model alike), else what the tool recorded."""
    model = ((spec or {}).get("model") or {}).get("id") or result.model
    return model.rstrip("/").split("/")[-1] if model else None
