"""The competitive-analysis section: published competitors (a real MLPerf summary and a
transcribed vendor table) beside a measured sweep, labelled as not measured here, with
per-dollar figures from the catalog's price table on one basis and the caveats listed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from pocforge.report.render import build, render_html
from pocforge.results.store import RunStore
from pocforge.spec import load_spec
from tests.results.conftest import DATA

pytestmark = pytest.mark.process  # the run store records the kit's git sha (a subprocess)

REPO = Path(__file__).parents[2]
MLPERF = "v4.1_nvidia_h200x8_trt_llama2-70b-99_server_summary.txt"
PUBLISHED = "trtllm_perf_overview_llama33_70b_fp8_h200.yaml"


@pytest.fixture
def context(tmp_path):
    folder = tmp_path / "pocs" / "rival"
    folder.mkdir(parents=True)
    shutil.copy(DATA / "mlperf" / MLPERF, folder / MLPERF)
    shutil.copy(DATA / "published" / PUBLISHED, folder / PUBLISHED)
    spec = yaml.safe_load((REPO / "pocs" / "demo" / "poc.yaml").read_text())
    spec["poc"]["name"] = "rival"
    spec["model"]["id"] = "model"
    spec["compare"] = {
        "price_per_gpu_hour": 1.12,
        "competitors": [
            {
                "name": "8xH200 MLPerf",
                "file": MLPERF,
                "format": "mlperf",
                "workload": "chat",
                "gpu": "H200",
                "gpus": 8,
                "price_per_gpu_hour": 2.5,
                "published": {
                    "url": "https://github.com/mlcommons/inference_results_v4.1",
                    "seen": "2026-12-01",
                    "publisher": "MLCommons",
                },
            },
            {"name": "B200 table", "file": PUBLISHED, "format": "published", "gpu": "B200"},
        ],
    }
    (folder / "poc.yaml").write_text(yaml.safe_dump(spec))
    run = RunStore(tmp_path / "results").create(load_spec(folder / "poc.yaml"))
    with run.stage("serving") as stage:
        stage.add_tree(DATA / "pocforge-sweep-a", "chat")
    run.finish()
    return build(run.path)


def test_published_competitors_say_so(context):
    names = [c.name for c in context["comparisons"]]
    assert names == [
        "8xH200 MLPerf (published, not measured here)",
        "B200 table (published, not measured here)",
    ]
    mlperf, table = context["comparisons"]
    assert mlperf.published.startswith("MLCommons, https://github.com/mlcommons/")
    assert "NVIDIA, TensorRT-LLM performance overview" in table.published


def test_per_dollar_uses_the_given_and_the_catalog_prices(context):
    mlperf, table = context["comparisons"]
    assert (mlperf.ours_price, mlperf.theirs_price) == (1.12, 2.5)
    assert mlperf.ours_usd_per_million == pytest.approx(1.12 / (mlperf.ours_best * 3600) * 1e6)
    assert mlperf.theirs_usd_per_million == pytest.approx(2.5 / (29228.22 / 8 * 3600) * 1e6)
    # B200's price comes from the catalog's owning-hyperscaler basis, with its source.
    assert table.theirs_price == 1.95
    assert any("B200 at $1.95/GPU-hour: owning-hyperscaler-tco (https://" in n for n in table.notes)


def test_an_offline_number_is_a_best_but_never_at_equal_interactivity(context):
    _, table = context["comparisons"]
    assert table.theirs_best == 2909 and table.at_interactivity == []
    assert any("without latency figures" in n for n in table.notes)


def test_caveats_name_both_stacks_and_the_model_difference(context):
    mlperf, _ = context["comparisons"]
    assert any(n.startswith("ours: vllm 0.32.0, model") for n in mlperf.notes)
    assert any(n.startswith("theirs: mlperf") for n in mlperf.notes)
    assert "server: MLPerf Server scenario: TTFT limit 2000 ms, TPOT limit 200 ms" in mlperf.notes


def test_section_renders_with_its_caveats(context):
    html = render_html(context)
    assert 'id="competitive"' in html and "Competitive analysis" in html
    assert "published, not measured here: MLCommons" in html


def test_per_watt_comes_from_our_telemetry_when_measured():
    """Our tokens per joule at the best point = 1 / its measured joules per token; theirs is
    their tok/s/GPU over the power per GPU the spec gives for them."""
    from pocforge.report.competitive import measured_per_watt
    from pocforge.results.compare import CompetitorComparison
    from pocforge.results.stage_schema import ServingPoint, ServingResult

    found = CompetitorComparison(
        name="rival", workload="chat", ours_best=100.0, theirs_best=50.0, ratio_best=2.0,
        at_interactivity=[], ours_best_point="c4",
    )  # fmt: skip
    point = ServingPoint(
        id="c4", mode="concurrency", value=4, metrics={"joules_per_token": {"value": 0.5}}
    )
    ours = ServingResult(workload="chat", tool="pocforge", points=[point])
    measured_per_watt(found, ours, 400.0, lambda text: text)
    assert found.ours_tokens_per_joule == 2.0 and found.theirs_tokens_per_joule == 50 / 400
    assert found.ratio_per_watt == pytest.approx(16.0)
    assert any("measured by the run's telemetry at c4 (0.5 J/token)" in n for n in found.notes)
