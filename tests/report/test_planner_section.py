"""The dashboard's predicted-vs-measured section: the run's plan.json (what ``pocforge run``
writes before any stage) beside a real sweep's measurements, point by point."""

from __future__ import annotations

import statistics

import pytest

from pocforge.report import render
from pocforge.report.render import build
from pocforge.runner.plan import plan_document
from pocforge.spec import load_poc
from tests.report.conftest import build_demo_run

pytestmark = pytest.mark.process  # the store's provenance runs git


def _with_plan(store):
    run = build_demo_run(store)
    doc = plan_document(load_poc("demo"))
    run.write_json("plan.json", doc)
    return run, doc


def test_every_planned_point_is_set_beside_its_measurement(store):
    """Each concurrency both planned (the demo sweeps c1, c4) and measured (the real sweep:
    c1, c2, c4, c8) gets throughput, TTFT and TPOT rows whose
    error is predicted / measured - 1; points the plan did not predict get none."""
    run, doc = _with_plan(store)
    section = next(s for s in build(run.path)["sections"] if s.id == "planner")
    rows = section.body["rows"]
    planned = {p["concurrency"] for p in doc["serving"]["workloads"][0]["points"]}
    assert {r["what"] for r in rows} == {f"chat c{c}" for c in planned}
    for row in rows:
        assert row["measured"] and row["predicted"] is not None
        assert row["error"] == pytest.approx(row["predicted"] / row["measured"] - 1)
    throughput = [abs(r["error"]) for r in rows if r["metric"] == "output tok/s/GPU"]
    assert section.body["median_abs_error"] == pytest.approx(statistics.median(throughput))


def test_the_dashboard_shows_the_planners_error(store):
    """The rendered page carries the table and the planner's median error."""
    run, _ = _with_plan(store)
    html = render(run.path).read_text()
    assert "Planner: predicted vs measured" in html and 'id="planner-table"' in html
    assert "Median absolute throughput error" in html


def test_a_run_without_a_plan_has_no_planner_section(store):
    """Runs from before the planner (or imports) render as before."""
    run = build_demo_run(store)
    assert "planner" not in [s.id for s in build(run.path)["sections"]]
    (run.path / "plan.json").write_text("{not json")
    assert "planner" not in [s.id for s in build(run.path)["sections"]]
