"""The dashboard's serving sections: per workload its table of points, Pareto and latency
charts, energy, prefill/decode split, prefix reuse and profile, with the baselines'
(``--compare``) and the spec's competitors' results beside ours and the caveats each
comparison carries."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pocforge.report import charts, competitive
from pocforge.report.sections import (
    Chart,
    Section,
    disagg_section,
    gpus_of,
    profile_section,
    reuse_section,
    watts_section,
)
from pocforge.results.compare import CompetitorComparison, Cost, compare_competitor
from pocforge.results.run_reader import RunData
from pocforge.results.serving import interactivity, throughput_per_gpu

SERVING_TABLE_STATS = ("p50", "p90", "p99")


@dataclass
class ServingPart:
    """What the serving results give the page: its sections, the competitor comparisons,
    the caveats they raise, and per workload its tool and GPUs (for the summary)."""

    sections: list[Section] = field(default_factory=list)
    comparisons: list[CompetitorComparison] = field(default_factory=list)
    caveats: list[str] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)


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


def serving_part(
    data: RunData,
    baselines: list[RunData],
    run_path: Path,
    ours_cost: Cost | None,
    _: Callable[[str], str],
) -> ServingPart:
    """Every workload's sections, comparisons and caveats (see the module notes)."""
    spec = data.run.manifest.spec
    part = ServingPart()
    sections, comparisons, caveats, serving_rows = (
        part.sections,
        part.comparisons,
        part.caveats,
        part.rows,
    )
    competitors = _competitors(spec, run_path, data.run.manifest.poc, caveats, _)
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

    return part
