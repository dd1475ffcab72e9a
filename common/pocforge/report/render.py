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
from pathlib import Path
from typing import Any

import jinja2

from pocforge.messages import join
from pocforge.report import (
    charts,
    competitive,
    planner,
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
from pocforge.report.sections import (
    Chart,
    Section,
    disagg_section,
    gpus_of,
    kernels_profile_section,
    profile_section,
    reuse_section,
    training_profile_section,
    watts_section,
)
from pocforge.results.compare import (
    CompetitorComparison,
    Cost,
    MetricDelta,
    compare_competitor,
    compare_runs,
)
from pocforge.results.run_reader import RunData
from pocforge.results.secrets import Redactor
from pocforge.results.serving import interactivity, throughput_per_gpu
from pocforge.results.store import Run
from pocforge.results.verdict_schema import CriterionVerdict
from pocforge.results.verdicts import judge_run, overall
from pocforge.results.verify import VerifyReport, verify

TEMPLATES = Path(__file__).parent / "templates"
SERVING_TABLE_STATS = ("p50", "p90", "p99")


class ReportError(ValueError):
    """A report that cannot be built (bad run reference, unreadable competitor); one line."""


def _slos(spec: dict[str, Any] | None, workload: str) -> list[dict[str, Any]]:
    for w in ((spec or {}).get("serving") or {}).get("workloads") or []:
        if w.get("name") == workload:
            return list(w.get("slos") or [])
    return []


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
        gpus = gpus_of(spec, result.gpus)
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
                        gpus_of(b.run.manifest.spec, bres.gpus),
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
        energy = watts_section(workload, result, _folder, _)
        if energy is not None:
            sections.append(energy)
        split = disagg_section(workload, result, gpus, spec, baselines, (min_inter, label), _)
        if split is not None:
            sections.append(split)
            caveats += [
                _("{workload} {point}: {n} requests failed at the P/D router").format(
                    workload=workload, point=r["id"], n=r["kv_transfer_failures"]
                )
                for r in split.body["rows"]
                if r["kv_transfer_failures"]
            ]
        reuse = reuse_section(workload, result, _)
        if reuse is not None:
            sections.append(reuse)
        profiled = profile_section(workload, result, _folder, run_path, _)
        if profiled is not None:
            sections.append(profiled)

    plan = read_plan(run_path)
    if plan is not None:
        workload_gpus = {row["workload"]: row["gpus"] for row in serving_rows}
        planned = planner.compare(plan, data, workload_gpus, _=_)
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
        profiled = training_profile_section(spec, run_path, _)
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
        profiled = kernels_profile_section(data.kernels, run_path, _)
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
