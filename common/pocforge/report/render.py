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
from pocforge.report.i18n import (
    LANGUAGES,
    NATIVE,
    Formats,
    check_language,
    gettext_for,
    translations,
)
from pocforge.report.patches import section as patches_section
from pocforge.report.sections import Section
from pocforge.report.serving_sections import serving_part
from pocforge.report.stage_sections import stage_sections
from pocforge.results.compare import Cost, MetricDelta, compare_runs
from pocforge.results.run_reader import RunData
from pocforge.results.secrets import Redactor
from pocforge.results.serving import throughput_per_gpu
from pocforge.results.store import Run
from pocforge.results.verdict_schema import CriterionVerdict
from pocforge.results.verdicts import judge_run, overall
from pocforge.results.verify import VerifyReport, verify

TEMPLATES = Path(__file__).parent / "templates"


class ReportError(ValueError):
    """A report that cannot be built (bad run reference, unreadable competitor); one line."""


def _run_caveats(
    data: RunData, report: VerifyReport, words: dict[str, str], _: Callable[[str], str]
) -> list[str]:
    """What the reader must know about the run as a whole: its status, its integrity, files
    that could not be read, stages that failed, a rank's warning, CPUs, an import."""
    m = data.run.manifest
    spec = m.spec
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
    return caveats


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
    caveats = _run_caveats(data, report, words, _)

    baselines = [RunData.load(Run.open(p)) for p in compare]
    deltas: list[MetricDelta] = []
    for b in baselines:
        deltas += compare_runs(b, data)

    serving = serving_part(data, baselines, run_path, ours_cost, _)
    sections: list[Section] = list(serving.sections)
    caveats += serving.caveats
    more, found = stage_sections(data, run_path, serving.rows, _)
    sections += more
    caveats += found
    carried = patches_section(data.provenance.patches if data.provenance else [], _)
    if carried is not None:
        sections.append(carried)

    for v in verdicts:
        if v.verdict != "pass" and v.notes:
            caveats.append(f"{v.criterion}: {join(v.notes, _)}")
    verdict = overall(verdicts)
    summary = _summary(verdict, verdicts, data, serving.rows, _, Formats(lang))
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
        "comparisons": serving.comparisons,
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
