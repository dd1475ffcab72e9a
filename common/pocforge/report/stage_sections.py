"""The dashboard's sections of the other stages: the planner's prediction against the
measurement, accuracy and parity, training, kernels, the cluster's health and collectives;
each with the caveats its results carry."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pocforge.report import charts, planner, watts
from pocforge.report.planner import read_plan
from pocforge.report.sections import (
    Chart,
    Section,
    kernels_profile_section,
    training_profile_section,
)
from pocforge.results.run_reader import RunData
from pocforge.results.stage_schema import TrainingResult
from pocforge.telemetry.series import Series


def stage_sections(
    data: RunData,
    run_path: Path,
    serving_rows: list[dict[str, Any]],
    _: Callable[[str], str],
) -> tuple[list[Section], list[str]]:
    """The sections after serving's, and their caveats."""
    spec = data.run.manifest.spec
    sections: list[Section] = []
    caveats: list[str] = []
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
        sections.append(training_section(data.training, run_path, _))
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

    return sections, caveats


def training_section(result: TrainingResult, run_path: Path, _: Callable[[str], str]) -> Section:
    """The training result, its loss curve and, where the run recorded telemetry
    (``training/telemetry.jsonl``), its power and utilisation beside its step times and
    the energy of the run and of its measured steps."""
    sec = Section(
        "training",
        _("Training"),
        [Chart("loss", _("Loss"), charts.to_json(charts.loss_curve(result, _=_)))],
        {"result": result, "energy": []},
    )
    path = run_path / "training" / "telemetry.jsonl"
    if not path.is_file():
        return sec
    series = Series.read(path)
    words = {
        "training": _("the whole run"),
        "training steps": _("measured steps"),
        "gpu": _("GPU"),
        "cpu-package": _("CPU package"),
    }
    sec.body["energy"] = watts.training_rows(series, words)
    curves = watts.training_timeline(series, result, _)
    if curves:
        figure = charts.power_timeline(curves, _("training"), _=_)
        sec.charts.append(
            Chart("training-watts", _("Power and utilization"), charts.to_json(figure))
        )
    return sec
