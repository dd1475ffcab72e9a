"""The dashboard's competitive analysis: our stack against each competitor at equal SLO.

For every competitor entry of the spec and each of our workloads it applies to: its label
("published, not measured here" when its numbers come from a publication), the GPU-hour
prices of both sides (the customer's or the competitor's own where the spec gives them,
else the catalog's ``prices.yaml`` on one basis for both, with its source), and the
caveats a reader must weigh: software, model and quantization, GPUs, dataset.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pocforge.catalog.prices import gpu_price, price_bases
from pocforge.results.compare import Cost

PUBLISHED_FORMATS = ("published",)


def applies(comp: dict[str, Any], workload: str) -> bool:
    wanted = comp.get("workload")
    return wanted is None or wanted == workload


def is_published(comp: dict[str, Any]) -> bool:
    return comp["format"] in PUBLISHED_FORMATS or bool(comp.get("published"))


def label(comp: dict[str, Any], _: Callable[[str], str]) -> str:
    """The competitor's name in charts and tables; published numbers say so."""
    if is_published(comp):
        return _("{name} (published, not measured here)").format(name=comp["name"])
    return comp["name"]


def published_source(comp: dict[str, Any], result: Any) -> str | None:
    block = comp.get("published")
    if block:
        return f"{block['publisher']}, {block['url']} (read {block['seen']})"
    if comp["format"] == "published" and result.notes:
        return result.notes[0]
    return None


def costs(
    spec: dict[str, Any] | None,
    comp: dict[str, Any],
    ours: Cost | None,
    our_gpus: int | None,
    _: Callable[[str], str],
) -> tuple[Cost, Cost, list[str]]:
    """(our cost, theirs, notes saying where each price came from)."""
    compare = (spec or {}).get("compare") or {}
    basis = compare.get("price_basis") or "owning-hyperscaler-tco"
    our_gpu = ((spec or {}).get("cluster") or {}).get("gpu")
    notes: list[str] = []
    mine = (ours or Cost()).model_copy(update={"gpus": (ours.gpus if ours else None) or our_gpus})
    if mine.price_per_gpu_hour is None:
        given = compare.get("price_per_gpu_hour")
        mine.price_per_gpu_hour = given or _catalog_price(our_gpu, basis)
        if not given and mine.price_per_gpu_hour is not None:
            notes.append(_catalog_note(our_gpu, basis, mine.price_per_gpu_hour, _))
    theirs = Cost(
        gpus=comp.get("gpus"),
        price_per_gpu_hour=comp.get("price_per_gpu_hour"),
        power_w_per_gpu=comp.get("power_w_per_gpu"),
    )
    if theirs.price_per_gpu_hour is None:
        theirs.price_per_gpu_hour = _catalog_price(comp.get("gpu"), basis)
        if theirs.price_per_gpu_hour is not None:
            notes.append(_catalog_note(comp.get("gpu"), basis, theirs.price_per_gpu_hour, _))
    if mine.price_per_gpu_hour is None or theirs.price_per_gpu_hour is None:
        missing = [
            name
            for name, cost, gpu in (
                ("ours", mine, our_gpu),
                (comp["name"], theirs, comp.get("gpu")),
            )
            if cost.price_per_gpu_hour is None
        ]
        notes.append(
            _("no per-dollar figure: no GPU-hour price for {sides} on the {basis} basis").format(
                sides=", ".join(missing), basis=basis
            )
        )
    return mine, theirs, notes


def _catalog_price(gpu: str | None, basis: str) -> float | None:
    try:
        return gpu_price(gpu, basis)
    except KeyError:
        return None


def _catalog_note(gpu: str | None, basis: str, price: float, _: Callable[[str], str]) -> str:
    entry = price_bases()[basis]
    return _("{gpu} at ${price}/GPU-hour: {basis} ({source}, read {seen})").format(
        gpu=gpu, price=f"{price:.2f}", basis=basis, source=entry.source, seen=entry.seen
    )


def caveats(
    spec: dict[str, Any] | None,
    comp: dict[str, Any],
    ours: Any,
    theirs: Any,
    our_gpus: int | None,
    _: Callable[[str], str],
) -> list[str]:
    """What differs between the two sides, for the reader to weigh: software, model and
    quantization, GPUs, dataset; and the competitor's own notes."""
    serving = (spec or {}).get("serving") or {}
    model = (spec or {}).get("model") or {}
    our_model = model.get("id")
    quant = model.get("quantization") or "none"
    precision = quant if quant != "none" else model.get("dtype") or "auto"
    out = [
        _("ours: {framework} {version}, {model} ({precision}) on {gpus} × {gpu}").format(
            framework=serving.get("framework", "?"),
            version=serving.get("version") or "",
            model=our_model,
            precision=precision,
            gpus=our_gpus or "?",
            gpu=((spec or {}).get("cluster") or {}).get("gpu"),
        ),
        _("theirs: {tool}, {model} on {gpus} × {gpu}").format(
            tool=theirs.tool,
            model=theirs.model or _("model not stated"),
            gpus=comp.get("gpus") or theirs.gpus or "?",
            gpu=comp.get("gpu") or _("GPU not stated"),
        ),
    ]
    if theirs.model and our_model and theirs.model.split("/")[-1] != our_model.split("/")[-1]:
        out.append(
            _(
                "different models ({ours} vs {theirs}): the ratio compares stacks on unlike work"
            ).format(ours=our_model, theirs=theirs.model)
        )
    out += theirs.notes
    out += [f"{point.id}: {note}" for point in theirs.points for note in point.caveats]
    out += [f"{d.metric}: {d.effect}" for d in theirs.differences]
    return list(dict.fromkeys(out))


def measured_per_watt(
    found: Any, ours: Any, theirs_power: float | None, _: Callable[[str], str]
) -> None:
    """Per watt from our own telemetry when no power was given for us: tokens per joule
    of our best point is 1 / its measured ``joules_per_token``; theirs needs their power."""
    if found.ours_tokens_per_joule is not None or found.ours_best_point is None:
        return
    point = next((p for p in ours.points if p.id == found.ours_best_point), None)
    joules = (point.metrics.get("joules_per_token") or {}).get("value") if point else None
    if not joules:
        return
    found.ours_tokens_per_joule = 1.0 / joules
    found.notes.append(
        _("ours per watt: measured by the run's telemetry at {point} ({joules} J/token)").format(
            point=point.id, joules=f"{joules:.4g}"
        )
    )
    if theirs_power and found.theirs_best is not None:
        found.theirs_tokens_per_joule = found.theirs_best / theirs_power
        found.ratio_per_watt = found.ours_tokens_per_joule / found.theirs_tokens_per_joule
