"""The dashboard: one self-contained HTML file rebuilt from a run folder alone.

``render(run_path, out)`` reads the run (manifest, provenance, stage results), judges the
spec's criteria, compares with ``--compare`` runs and the spec's competitors, builds the
plotly figures from aggregates, and renders ``templates/dashboard.html.j2`` with plotly's
JavaScript inlined: no network, no server, a customer opens it from an e-mail. Raw
per-request records are never embedded, so the file stays small however big the run.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2

from pocforge.messages import join
from pocforge.report import (
    charts,
    competitive,
    disagg,
    kv_reuse,
    ops_table,
    planner,
    profiles,
    watts,
)
from pocforge.report.i18n import (
    LANGUAGES,
    NATIVE,
    Formats,
    check_language,
    gettext_for,
    translations,
)
from pocforge.report.planner import read_plan
from pocforge.results.compare import (
    CompetitorComparison,
    Cost,
    MetricDelta,
    compare_competitor,
    compare_runs,
)
from pocforge.results.run_reader import RunData
from pocforge.results.schema import KernelResults
from pocforge.results.secrets import Redactor
from pocforge.results.serving import interactivity, throughput_per_gpu
from pocforge.results.store import Run
from pocforge.results.verdicts import CriterionVerdict, judge_run, overall
from pocforge.results.verify import VerifyReport, verify

TEMPLATES = Path(__file__).parent / "templates"
SERVING_TABLE_STATS = ("p50", "p90", "p99")


class ReportError(ValueError):
    """A report that cannot be built (bad run reference, unreadable competitor); one line."""


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


def _slos(spec: dict[str, Any] | None, workload: str) -> list[dict[str, Any]]:
    for w in ((spec or {}).get("serving") or {}).get("workloads") or []:
        if w.get("name") == workload:
            return list(w.get("slos") or [])
    return []


def _dataset(spec: dict[str, Any] | None, workload: str) -> Any:
    for w in ((spec or {}).get("serving") or {}).get("workloads") or []:
        if w.get("name") == workload:
            return w.get("dataset")
    return None


def _gpus(spec: dict[str, Any] | None, result_gpus: int | None) -> int | None:
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


def _competitors(
    spec: dict[str, Any] | None,
    run_path: Path,
    poc: str,
    caveats: list[str],
    _: Callable[[str], str],
) -> list[tuple[Any, Any]]:
    """(Competitor spec entry, Imported) for each competitor file of the spec: the copy the
    run keeps (``compare/``), so the page rebuilds from the run folder alone, else the POC's."""
    from pocforge.paths import pocs_dir
    from pocforge.results.importers import ResultImportError, parse

    out = []
    for comp in ((spec or {}).get("compare") or {}).get("competitors") or []:
        kept = run_path / "compare" / Path(comp["file"]).name
        path = kept if kept.is_file() else pocs_dir() / poc / comp["file"]
        if comp["format"] == "pocforge":
            caveats.append(
                _("competitor {name}: pocforge runs are compared with --compare").format(
                    name=comp["name"]
                )
            )
            continue
        try:
            out.append((comp, parse([path], comp["format"], "competitor", comp.get("gpus"))))
        except ResultImportError as exc:
            caveats.append(
                _("competitor {name} not shown: {error}").format(name=comp["name"], error=exc)
            )
    return out


def build(
    run_path: Path, compare: list[Path] = (), ours_cost: Cost | None = None, lang: str = "en"
) -> dict[str, Any]:
    """The template context of a run's dashboard, its text in ``lang``."""
    _ = gettext_for(lang)
    words = _words(_)
    run = Run.open(run_path)
    m = run.manifest
    spec = m.spec
    data = RunData.load(run)
    report: VerifyReport = verify(run_path)
    verdicts: list[CriterionVerdict] = judge_run(run)
    caveats: list[str] = []

    if m.status != "complete":
        caveats.append(
            _("the run's status is {status}: results may be partial").format(
                status=words.get(m.status, m.status)
            )
        )
    caveats += [_("integrity: {problem}").format(problem=line) for line in report.lines()]
    caveats += [_("unreadable: {problem}").format(problem=p) for p in data.problems]
    for name, stage in m.stages.items():
        if stage.status in ("failed", "interrupted"):
            status = words.get(stage.status, stage.status)
            if stage.error:
                caveats.append(
                    _("stage {stage} {status}: {error}").format(
                        stage=name, status=status, error=stage.error
                    )
                )
            else:
                caveats.append(_("stage {stage} {status}").format(stage=name, status=status))
    if data.training is not None:  # a rank that died at exit, after a complete run
        warned = [
            n.removeprefix("warning: ") for n in data.training.notes if n.startswith("warning: ")
        ]
        caveats += [_("training: {warning}").format(warning=w) for w in warned]
    if (spec or {}).get("cluster", {}).get("gpu") == "cpu":
        caveats.append(
            _("this run used CPUs, not GPUs: its numbers say nothing about GPU performance")
        )
    if m.imported_from:
        caveats.append(
            _("imported from {tool} ({file}); definitions differ as listed").format(
                tool=m.imported_from.tool, file=m.imported_from.file
            )
        )

    baselines = [RunData.load(Run.open(p)) for p in compare]
    deltas: list[MetricDelta] = []
    for b in baselines:
        deltas += compare_runs(b, data)

    competitors = _competitors(spec, run_path, m.poc, caveats, _)
    comparisons: list[CompetitorComparison] = []
    sections: list[Section] = []
    serving_rows = []
    for workload, (result, _folder) in data.serving.items():
        gpus = _gpus(spec, result.gpus)
        slos = _slos(spec, workload)
        tpot = [s for s in slos if s.get("metric") == "tpot_ms"]
        min_inter = 1000.0 / min(s["max_ms"] for s in tpot) if tpot else None
        label = (
            _("SLO: TPOT p{percentile} ≤ {max_ms} ms").format(
                percentile=f"{tpot[0]['percentile']:g}", max_ms=f"{tpot[0]['max_ms']:g}"
            )
            if tpot
            else None
        )
        failing = [
            p.id
            for p in result.points
            for s in slos
            if s.get("metric") != "tpot_ms"
            and (v := p.metrics.get(s["metric"], {}).get(f"p{s['percentile']:g}")) is not None
            and v > s["max_ms"]
        ]
        others = []
        for b in baselines:
            if workload in b.serving:
                bres = b.serving[workload][0]
                others.append(
                    (
                        _("baseline {run_id}").format(run_id=b.run.manifest.run_id),
                        bres,
                        _gpus(b.run.manifest.spec, bres.gpus),
                    )
                )
        for comp, imported in competitors:
            if not competitive.applies(comp, workload):
                continue
            match = [r for r in imported.serving if r.workload == workload] or (
                imported.serving if len(imported.serving) == 1 else []
            )
            for r in match:
                name = competitive.label(comp, _)
                others.append((name, r, comp.get("gpus") or r.gpus))
                mine, theirs, price_notes = competitive.costs(spec, comp, ours_cost, gpus, _)
                found = compare_competitor(name, result, r, mine, theirs, min_inter)
                found.published = competitive.published_source(comp, r)
                competitive.measured_per_watt(found, result, comp.get("power_w_per_gpu"), _)
                found.notes += price_notes
                found.notes += competitive.caveats(spec, comp, result, r, gpus, _)
                comparisons.append(found)
                for d in r.differences:
                    caveats.append(
                        _("{name} ({tool}) {metric}: {theirs}; ours {ours} — {effect}").format(
                            name=comp["name"],
                            tool=r.tool,
                            metric=d.metric,
                            theirs=d.theirs,
                            ours=d.ours,
                            effect=d.effect,
                        )
                    )
        for p in result.points:
            if p.client_limited:
                caveats.append(
                    _(
                        "{workload} {point}: the load generator, not the server, was the limit"
                        " ({caveats})"
                    ).format(workload=workload, point=p.id, caveats="; ".join(p.caveats))
                )
            elif p.caveats:
                caveats += [f"{workload} {p.id}: {c}" for c in p.caveats]
        for d in result.differences:
            caveats.append(
                _("{tool} {metric}: {theirs}; ours {ours} — {effect}").format(
                    tool=result.tool, metric=d.metric, theirs=d.theirs, ours=d.ours, effect=d.effect
                )
            )
        rows = []
        for p in result.points:
            x = interactivity(p)
            rows.append(
                {
                    "id": p.id,
                    "status": p.status,
                    "requests": p.requests,
                    "failed": p.failed,
                    "repeats": p.repeats,
                    "client_limited": p.client_limited,
                    "tput": p.metrics.get("output_throughput", {}).get("value"),
                    "tput_gpu": throughput_per_gpu(p, gpus),
                    "interactivity": x,
                    "goodput": p.metrics.get("goodput", {}).get("value"),
                    "lat": {
                        m_: {s: p.metrics.get(m_, {}).get(s) for s in SERVING_TABLE_STATS}
                        for m_ in ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms")
                    },
                }
            )
        serving_rows.append({"workload": workload, "tool": result.tool, "gpus": gpus})
        sec = Section(
            id=f"serving-{workload}",
            title=_("Serving — {workload}").format(workload=workload),
            body={
                "rows": rows,
                "result": result,
                "gpus": gpus,
                "slos": slos,
                "notes": result.notes,
            },
        )
        sec.charts.append(
            Chart(
                f"pareto-{workload}",
                _("Pareto"),
                charts.to_json(charts.pareto(result, gpus, others, min_inter, label, failing, _=_)),
            )
        )
        sec.charts.append(
            Chart(
                f"latency-{workload}",
                _("Latency"),
                charts.to_json(charts.latency_percentiles(result, _=_)),
            )
        )
        sections.append(sec)
        energy = _watts_section(workload, result, _folder, _)
        if energy is not None:
            sections.append(energy)
        split = _disagg_section(workload, result, gpus, spec, baselines, (min_inter, label), _)
        if split is not None:
            sections.append(split)
            caveats += [
                _("{workload} {point}: {n} requests failed at the P/D router").format(
                    workload=workload, point=r["id"], n=r["kv_transfer_failures"]
                )
                for r in split.body["rows"]
                if r["kv_transfer_failures"]
            ]
        reuse = _reuse_section(workload, result, _)
        if reuse is not None:
            sections.append(reuse)
        profiled = _profile_section(workload, result, _folder, run_path, _)
        if profiled is not None:
            sections.append(profiled)

    plan = read_plan(run_path)
    if plan is not None:
        gpus_of = {row["workload"]: row["gpus"] for row in serving_rows}
        planned = planner.compare(plan, data, gpus_of, _=_)
        if planned["rows"]:
            sections.append(Section("planner", _("Planner: predicted vs measured"), body=planned))
    if data.sanity is not None or data.accuracy or data.parity is not None:
        sections.append(
            Section(
                "accuracy",
                _("Accuracy and parity"),
                body={"sanity": data.sanity, "accuracy": data.accuracy, "parity": data.parity},
            )
        )
    if data.training is not None:
        for d in data.training.differences:
            caveats.append(
                _("{tool} {metric}: {theirs}; ours {ours} — {effect}").format(
                    tool=data.training.tool,
                    metric=d.metric,
                    theirs=d.theirs,
                    ours=d.ours,
                    effect=d.effect,
                )
            )
        sections.append(
            Section(
                "training",
                _("Training"),
                [Chart("loss", _("Loss"), charts.to_json(charts.loss_curve(data.training, _=_)))],
                {"result": data.training},
            )
        )
        profiled = _training_profile_section(spec, run_path, _)
        if profiled is not None:
            sections.append(profiled)
    if data.kernels is not None and data.kernels.rows:
        if not data.kernels.timed:
            caveats.append(
                # a literal % is written %% and formatted away (as the template's _() does)
                _(
                    "kernel times were not measured on a GPU (interpreter): %% of roofline is"
                    " not meaningful"
                )
                % {}
            )
        bars = [
            Chart("kernels", _("Kernels"), charts.to_json(charts.kernel_bars(data.kernels, _=_)))
        ]
        sections.append(
            Section(
                "kernels",
                _("Kernels"),
                bars if data.kernels.timed else [],
                {"result": data.kernels},
            )
        )
        profiled = _kernels_profile_section(data.kernels, run_path, _)
        if profiled is not None:
            sections.append(profiled)
    if data.cluster is not None or data.collectives:
        sec = Section("cluster", _("Cluster"))
        if data.cluster is not None:
            hosts = sorted({c.host for c in data.cluster.checks})
            names = list(dict.fromkeys(c.check for c in data.cluster.checks))
            cells = {(c.host, c.check): c for c in data.cluster.checks}
            sec.body["matrix"] = {"hosts": hosts, "checks": names, "cells": cells}
        if data.collectives:
            sec.charts.append(
                Chart(
                    "collectives",
                    _("Collectives"),
                    charts.to_json(charts.collective_curves(data.collectives, _=_)),
                )
            )
            sec.body["collectives"] = data.collectives
        sections.append(sec)

    for v in verdicts:
        if v.verdict != "pass" and v.notes:
            caveats.append(f"{v.criterion}: {join(v.notes, _)}")
    verdict = overall(verdicts)
    summary = _summary(verdict, verdicts, data, serving_rows, _, Formats(lang))
    redactor = Redactor.for_spec(None)
    return {
        "title": _("{poc} — POC results").format(poc=m.poc),
        "customer": ((spec or {}).get("poc") or {}).get("customer"),
        "description": ((spec or {}).get("poc") or {}).get("description"),
        "manifest": m,
        "spec_json": redactor.text(json.dumps(spec, indent=2)) if spec else None,
        "verdict": verdict,
        "banner": {
            "pass": _("PASS"),
            "fail": _("FAIL"),
            "inconclusive": _("INCONCLUSIVE"),
            "none": _("NO CRITERIA"),
        }[verdict],
        "summary": summary,
        "verdicts": verdicts,
        "sections": sections,
        "deltas": deltas,
        "comparisons": comparisons,
        "provenance": data.provenance,
        "verify": report,
        "caveats": list(dict.fromkeys(caveats)),
        "words": words,
        "languages": [],
    }


def _watts_section(
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


def _disagg_section(
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
        their_model, their_gpus = disagg.model_name(bspec, theirs), _gpus(bspec, theirs.gpus)
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
            if _dataset(bspec, theirs.workload) != _dataset(spec, workload):
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


def _reuse_section(workload: str, result: Any, _: Callable[[str], str]) -> Section | None:
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


def _profile_section(
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
            "labels": _profile_labels(_),
            "kernel_labels": _kernel_labels(_),
            "top": ops_table.TOP,
        },
    )


def _training_profile_section(
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
            "labels": _profile_labels(_),
            "kernel_labels": _kernel_labels(_),
            "top": ops_table.TOP,
            "training": True,
        },
    )


def _kernels_profile_section(
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
        body={"points": found, "kernel_labels": _kernel_labels(_), "kernels": True},
    )


def _kernel_labels(_: Callable[[str], str]) -> dict[str, str]:
    """The page's words for :data:`pocforge.report.kernel_stats.CATEGORIES`."""
    return {
        "communication": _("communication"),
        "moe": _("MoE"),
        "attention": _("attention"),
        "gemm": _("GEMM"),
        "norm_elementwise": _("norms, activations, elementwise"),
        "other": _("other"),
    }


def _profile_labels(_: Callable[[str], str]) -> dict[str, str]:
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


def _words(_: Callable[[str], str]) -> dict[str, str]:
    """How the page names the kit's enumerated values (verdicts, changes, statuses, bounds);
    the values themselves stay English in CSS classes and ids."""
    return {
        "pass": _("pass"),
        "fail": _("fail"),
        "inconclusive": _("inconclusive"),
        "warn": _("warn"),
        "skip": _("skip"),
        "better": _("better"),
        "worse": _("worse"),
        "same": _("same"),
        "running": _("running"),
        "complete": _("complete"),
        "failed": _("failed"),
        "interrupted": _("interrupted"),
        "skipped": _("skipped"),
        "memory": _("memory"),
        "compute": _("compute"),
        "prefill": _("prefill"),
        "decode": _("decode"),
    }


def _summary(
    verdict: str,
    verdicts: list[CriterionVerdict],
    data: RunData,
    serving: list[dict],
    _: Callable[[str], str],
    formats: Formats,
) -> str:
    n = len(verdicts)
    counts = {k: sum(v.verdict == k for v in verdicts) for k in ("pass", "fail", "inconclusive")}
    if verdict == "none":
        head = _("No acceptance criteria are set for this run.")
    elif verdict == "pass":
        head = _("PASS: all {n} acceptance criteria are met.").format(n=n)
    elif verdict == "fail":
        failed = ", ".join(v.criterion for v in verdicts if v.verdict == "fail")
        head = _("FAIL: {failed} of {n} acceptance criteria are not met ({criteria}).").format(
            failed=counts["fail"], n=n, criteria=failed
        )
    else:
        head = _(
            "INCONCLUSIVE: {passed} of {n} criteria pass, none fails, "
            "{undecided} cannot be decided with the data at hand."
        ).format(passed=counts["pass"], n=n, undecided=counts["inconclusive"])
    parts = [head]
    for s in serving:
        result = data.serving[s["workload"]][0]
        best = max((throughput_per_gpu(p, s["gpus"]) or 0.0 for p in result.points), default=0.0)
        if best:
            parts.append(
                _(
                    "Workload {workload}: up to {best} output tokens/s per GPU over "
                    "{points} load points ({tool})."
                ).format(
                    workload=s["workload"],
                    best=formats.num(round(best)),
                    points=len(result.points),
                    tool=s["tool"],
                )
            )
    return " ".join(parts)


def _env(lang: str = "en") -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=["jinja2.ext.i18n"],
    )
    env.install_gettext_translations(translations(lang), newstyle=True)  # type: ignore[attr-defined]
    formats = Formats(lang)
    env.filters["num"] = formats.num
    env.filters["pct"] = formats.pct
    env.filters["share"] = formats.share
    env.filters["when"] = formats.when
    return env


def render_html(context: dict[str, Any], lang: str = "en") -> str:
    from plotly.offline import get_plotlyjs

    template = _env(lang).get_template("dashboard.html.j2")
    text = template.render(**context, plotly_js=get_plotlyjs(), html=html, lang=lang)
    return Redactor.for_spec(None).text(text)


def spec_language(run_path: Path) -> str:
    """The language the run's spec asks for (``poc.language``; English for runs before it)."""
    spec = Run.open(run_path).manifest.spec or {}
    return (spec.get("poc") or {}).get("language") or "en"


def dashboard_file(run_path: Path, lang: str) -> Path:
    """``dashboard.html`` in the spec's language, ``dashboard.<lang>.html`` in another."""
    if lang == spec_language(run_path):
        return run_path / "dashboard.html"
    return run_path / f"dashboard.{lang}.html"


def _switch(run_path: Path, lang: str, rendering: list[str]) -> list[dict[str, str]]:
    """Links to the run's dashboard in the other languages that exist (or are being
    rendered with this one): none when there is only this one."""
    links = []
    for other in LANGUAGES:
        target = dashboard_file(run_path, other)
        if other != lang and (other in rendering or target.is_file()):
            links.append({"lang": other, "name": NATIVE[other], "href": target.name})
    return links


def render(
    run_path: str | Path,
    out: str | Path | None = None,
    compare: list[Path] = (),
    ours_cost: Cost | None = None,
    lang: str | None = None,
    rendering: list[str] = (),
) -> Path:
    """Write the dashboard of a run in ``lang`` (default: the spec's ``poc.language``);
    default file :func:`dashboard_file`. ``rendering``: the other languages written with
    this one (the language switch links to them)."""
    from pocforge.atomic import write_text

    run_path = Path(run_path)
    lang = check_language(lang or spec_language(run_path))
    out = Path(out) if out else dashboard_file(run_path, lang)
    context = build(run_path, list(compare), ours_cost, lang)
    context["languages"] = _switch(run_path, lang, list(rendering))
    write_text(out, render_html(context, lang))
    return out
