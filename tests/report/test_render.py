"""The dashboard HTML: self-contained, built from aggregates, small and quick for big runs."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from pocforge.report import render
from pocforge.results.store import Run, RunStore
from tests.report.conftest import DATA, build_demo_run

# Starts a subprocess (git for provenance, patch, the CLI) or opens a local socket.
pytestmark = pytest.mark.process

EXTERNAL = re.compile(
    r"<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)\s*=\s*[\"']?(?:https?:)?//", re.I
)


def test_dashboard_is_self_contained(demo_run: Run) -> None:
    html = render(demo_run.path).read_text()
    assert not EXTERNAL.search(html), "the dashboard must not load anything from the network"
    assert "Plotly.newPlot" in html and 'id="overall-verdict"' in html
    for heading in (
        "Executive summary",
        "Acceptance criteria",
        "Serving — chat",
        "Cluster",
        "Provenance",
        "Caveats",
        "serving.chat.ttft_ms.p90",
        "all_reduce",
    ):
        assert heading in html
    assert "CPUs, not GPUs" in html  # the demo's caveat
    assert html.count('class="chart"') == 3  # pareto, latency, collectives


def test_compare_adds_regression_and_baseline_curve(store: RunStore) -> None:
    base = build_demo_run(store, "pocforge-sweep-b")
    run = build_demo_run(store, "pocforge-sweep-a")
    html = render(run.path, compare=[base.path]).read_text()
    assert "Against baseline runs" in html and f"baseline {base.manifest.run_id}" in html
    assert "bootstrap" in html and "welch" in html


def test_large_run_renders_small_and_fast(store: RunStore) -> None:
    """120,000 request records (real records repeated): the report never embeds them.

    `python -m benchmarks.report_large` times the 1,000,000-record case."""
    from benchmarks.report_large import build_large_run

    run = build_large_run(store, 120_000)
    t0 = time.perf_counter()
    out = render(run.path)
    elapsed = time.perf_counter() - t0
    assert out.stat().st_size < 10 * 1024**2
    assert (
        elapsed < 30
    )  # generous: the bound is for a shared CI machine, the benchmark has the number
    from pocforge.results.verdicts import judge_run

    ttft = next(v for v in judge_run(run) if v.metric == "serving.chat.ttft_ms.p90")
    assert "even sample of 20,000 of 30,000 requests" in ttft.note


def test_cli_report_errors_are_one_line(tmp_path: Path) -> None:
    from pocforge.cli.report import report_cmd

    runner = CliRunner()
    res = runner.invoke(report_cmd, ["nope/none", "--root", str(tmp_path)])
    assert (
        res.exit_code == 2
        and "Traceback" not in res.output
        and len(res.output.strip().splitlines()) == 1
    )


def test_cli_report_newest_run(store: RunStore) -> None:
    from pocforge.cli.report import report_cmd

    build_demo_run(store)
    newest = build_demo_run(store)
    res = CliRunner().invoke(report_cmd, ["demo", "--root", str(store.root)])
    assert res.exit_code == 0, res.output
    assert (newest.path / "dashboard.html").exists()
    assert DATA.exists()


def test_competitor_curve_from_the_run_folder_alone(tmp_path) -> None:
    """A competitor named in the spec (a real `vllm bench serve` result) is kept in the run,
    overlaid on the Pareto chart and compared per GPU, even after the POC's copy is gone."""
    import shutil

    import yaml

    from pocforge.report.render import build, render_html
    from pocforge.results.store import RunStore
    from pocforge.spec import load_spec
    from tests.results.conftest import DATA

    folder = tmp_path / "pocs" / "rival"
    folder.mkdir(parents=True)
    shutil.copy(DATA / "vllm-c4.json", folder / "theirs.json")
    spec = yaml.safe_load((Path(__file__).parents[2] / "pocs" / "demo" / "poc.yaml").read_text())
    spec["poc"]["name"] = "rival"
    spec["model"]["id"] = "model"
    spec["compare"] = {
        "competitors": [
            {"name": "Rival GPU (vLLM client)", "file": "theirs.json", "format": "vllm", "gpus": 1}
        ]
    }
    (folder / "poc.yaml").write_text(yaml.safe_dump(spec))
    run = RunStore(tmp_path / "results").create(load_spec(folder / "poc.yaml"))
    with run.stage("serving") as stage:
        stage.add_tree(DATA / "pocforge-sweep-a", "chat")
    run.finish()
    (folder / "theirs.json").unlink()  # the run's own copy must be enough

    context = build(run.path)
    (comparison,) = context["comparisons"]
    assert comparison.name == "Rival GPU (vLLM client)"
    html = render_html(context)
    assert "Rival GPU (vLLM client)" in html
    pareto = next(c for s in context["sections"] for c in s.charts if c.id == "pareto-chat")
    assert "Rival GPU (vLLM client)" in pareto.figure  # its curve is drawn beside ours
