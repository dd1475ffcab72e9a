"""The dashboard's sections by topic, each built from one workload's (or the run's) results:
where the watts go, disaggregated serving, KV-cache reuse, the profiled points, training's
profile and the kernels' profiler tables; and the section and chart the page renders
(:mod:`pocforge.report.render` assembles them)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pocforge.report import (
    charts,
    disagg,
    kv_reuse,
    ops_table,
    profiles,
    watts,
)
from pocforge.results.run_reader import RunData
from pocforge.results.stage_schema import KernelResults


def dataset_of(spec: dict[str, Any] | None, workload: str) -> Any:
    for w in ((spec or {}).get("serving") or {}).get("workloads") or []:
        if w.get("name") == workload:
            return w.get("dataset")
    return None


def gpus_of(spec: dict[str, Any] | None, result_gpus: int | None) -> int | None:
    if result_gpus:
        return result_gpus
    pools = disagg.disaggregation(spec)
    if pools is not None:
        return pools.gpus
    serving = (spec or {}).get("serving") or {}
    par = serving.get("parallelism") or {}
    if par:
        return int(par.get("tp", 1) * par.get("pp", 1) * par.get("dp", 1)) * int(
            serving.get("replicas", 1)
        )
    return None


@dataclass
class Chart:
    id: str
    title: str
    figure: str  # plotly JSON


@dataclass
class Section:
    id: str
    title: str
    charts: list[Chart] = field(default_factory=list)
    body: dict[str, Any] = field(default_factory=dict)


def watts_section(
    workload: str, result: Any, folder: Path | None, _: Callable[[str], str]
) -> Section | None:
    """The workload's "where the watts go" section (:mod:`pocforge.report.watts`); None
    when no point of it has telemetry."""
    loaded = watts.load(result, folder)
    if not loaded:
        return None
    curves = watts.timeline(loaded, folder, _)
    names = {
        "GPU": _("GPU"),
        "CPU package": _("CPU package"),
        "counter": _("energy counter"),
        "power": _("power readings"),
    }
    rows = watts.rows(loaded, names)
    measured = {
        "energy": any(r[m] is not None for r in rows for m in watts.ENERGY_METRICS),
        "usd": any(r["usd_per_million_tokens"] is not None for r in rows),
    }
    problems = list(dict.fromkeys(p for r in rows for p in r["problems"]))
    sec = Section(
        id=f"watts-{workload}",
        title=_("Where the watts go — {workload}").format(workload=workload),
        body={"rows": rows, "measured": measured, "problems": problems},
    )
    if curves:
        sec.charts.append(
            Chart(
                f"watts-{workload}",
                _("Power and utilization"),
                charts.to_json(charts.power_timeline(curves, workload, _=_)),
            )
        )
    return sec


def disagg_section(
    workload: str,
    result: Any,
    gpus: int | None,
    spec: dict[str, Any] | None,
    baselines: list[RunData],
    slo: tuple[float | None, str | None],
    _: Callable[[str], str],
) -> Section | None:
    """The workload's "disaggregated serving" section (:mod:`pocforge.report.disagg`): the
    pools, the TTFT split per point, and this run's curve labelled with its P:D ratio
    beside each baseline of the same model on as many GPUs. None for an aggregated
    deployment, or when no point has the router's figures."""
    plan = disagg.disaggregation(spec)
    rows = disagg.rows(result) if plan is not None else []
    if plan is None or not rows:
        return None
    ours = disagg.label(plan, _)
    model = disagg.model_name(spec, result)
    others: list[tuple[str, Any, int | None]] = []
    notes: list[str] = []  # baselines left out or to be read with care
    for b in baselines:
        found = b.serving.get(workload) or (
            next(iter(b.serving.values())) if len(b.serving) == 1 else None
        )
        if found is None:
            continue
        theirs, run_id, bspec = found[0], b.run.manifest.run_id, b.run.manifest.spec
        their_model, their_gpus = disagg.model_name(bspec, theirs), gpus_of(bspec, theirs.gpus)
        if their_model != model:
            notes.append(
                _("baseline {run_id} not drawn: it served {theirs}, this run {ours}").format(
                    run_id=run_id, theirs=their_model or "?", ours=model or "?"
                )
            )
        elif their_gpus != gpus:
            notes.append(
                _(
                    "baseline {run_id} not drawn: its GPU count is {theirs}, this run's {ours}"
                ).format(run_id=run_id, theirs=their_gpus or "?", ours=gpus or "?")
            )
        else:
            name = _("baseline {run_id}: {deployment}").format(
                run_id=run_id, deployment=disagg.deployment_label(bspec, _)
            )
            others.append((name, theirs, their_gpus))
            if dataset_of(bspec, theirs.workload) != dataset_of(spec, workload):
                notes.append(
                    _(
                        "baseline {run_id} sent other requests (its workload's dataset differs):"
                        " the curves compare unlike work"
                    ).format(run_id=run_id)
                )
    sec = Section(
        id=f"disagg-{workload}",
        title=_("Disaggregated serving — {workload}").format(workload=workload),
        body={
            "label": ours,
            "gpus": plan.gpus,
            "connector": plan.connector or plan.transfer_backend,
            "pools": disagg.pools(plan),
            "rows": rows,
            "measured": disagg.measured(result),
            "notes": notes,
        },
    )
    min_inter, slo_label = slo
    sec.charts.append(
        Chart(
            f"pd-pareto-{workload}",
            _("Aggregated vs disaggregated"),
            charts.to_json(
                charts.pareto(
                    result,
                    gpus,
                    others,
                    min_inter,
                    slo_label,
                    _=_,
                    ours=ours,
                    title=_("Aggregated vs disaggregated — {workload}").format(workload=workload),
                )
            ),
        )
    )
    if any(r["prefill_ms"] is not None or r["transfer_decode_ms"] is not None for r in rows):
        sec.charts.append(
            Chart(
                f"ttft-split-{workload}",
                _("TTFT split"),
                charts.to_json(charts.ttft_split(rows, workload, _=_)),
            )
        )
    return sec


def reuse_section(workload: str, result: Any, _: Callable[[str], str]) -> Section | None:
    """The workload's "KV-cache reuse" section (:mod:`pocforge.report.kv_reuse`); None
    when no point has a prefix-cache hit rate or a TTFT by turn."""
    rows = kv_reuse.rows(result)
    if not rows:
        return None
    turns = kv_reuse.has_turns(rows)
    sec = Section(
        id=f"reuse-{workload}",
        title=_("KV-cache reuse — {workload}").format(workload=workload),
        body={
            "rows": rows,
            "hit_rate": any(r["hit_rate"] is not None for r in rows),
            "turns": turns,
        },
    )
    if turns:
        sec.charts.append(
            Chart(
                f"ttft-turns-{workload}",
                _("TTFT by turn"),
                charts.to_json(charts.ttft_by_turn(rows, workload, _=_)),
            )
        )
    return sec


def profile_section(
    workload: str, result: Any, folder: Path | None, run_path: Path, _: Callable[[str], str]
) -> Section | None:
    """The workload's "Profiles" section (:mod:`pocforge.report.profiles`): per profiled
    point its traces to open in Perfetto and the top of the profiler's table of operations;
    None when no point of it was profiled."""
    found = profiles.points(result, folder, run_path)
    if not found:
        return None
    return Section(
        id=f"profile-{workload}",
        title=_("Profiles — {workload}").format(workload=workload),
        body={
            "points": found,
            "labels": profile_labels(_),
            "kernel_labels": kernel_labels(_),
            "top": ops_table.TOP,
        },
    )


def training_profile_section(
    spec: dict[str, Any] | None, run_path: Path, _: Callable[[str], str]
) -> Section | None:
    """The training stage's "Profiles" section: torch.profiler over the chosen steps, per
    rank a trace and its table of operations; None when training was not profiled."""
    steps = (((spec or {}).get("training") or {}).get("profile") or {}).get("steps") or []
    found = profiles.training(run_path / "training" / "profile", steps, run_path)
    if not found:
        return None
    return Section(
        id="profile-training",
        title=_("Profiles — training"),
        body={
            "points": found,
            "labels": profile_labels(_),
            "kernel_labels": kernel_labels(_),
            "top": ops_table.TOP,
            "training": True,
        },
    )


def kernels_profile_section(
    kernels: KernelResults, run_path: Path, _: Callable[[str], str]
) -> Section | None:
    """The kernel benchmark's "Profiles" section: per op, the GPU kernels by time its
    profiler summed (``kernels/profiles/<op>/``); None when no op was profiled."""
    found = profiles.ops(run_path / "kernels" / "profiles", [r.op for r in kernels.rows], run_path)
    found = [entry for entry in found if entry["kernels"]]
    if not found:
        return None
    return Section(
        id="profile-kernels",
        title=_("Profiles — kernels"),
        body={"points": found, "kernel_labels": kernel_labels(_), "kernels": True},
    )


def kernel_labels(_: Callable[[str], str]) -> dict[str, str]:
    """The page's words for :data:`pocforge.report.kernel_stats.CATEGORIES`."""
    return {
        "communication": _("communication"),
        "moe": _("MoE"),
        "attention": _("attention"),
        "gemm": _("GEMM"),
        "norm_elementwise": _("norms, activations, elementwise"),
        "other": _("other"),
    }


def profile_labels(_: Callable[[str], str]) -> dict[str, str]:
    return {
        ops_table.NAME: _("operation"),
        "Self CPU %": _("self CPU share"),
        "Self CPU": _("self CPU time"),
        "CPU total": _("CPU total"),
        "Self CUDA": _("self CUDA time"),
        "CUDA total": _("CUDA total"),
        "# of Calls": _("calls"),
        "Self CPU time total": _("self CPU time, all operations"),
        "Self CUDA time total": _("self CUDA time, all operations"),
    }
