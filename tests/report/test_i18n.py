"""The dashboard in Simplified Chinese: every message translated, the English page byte for
byte what it was before translations existed, and the Chinese page chosen by ``--lang`` or
by the spec's ``poc.language``."""

from __future__ import annotations

import json
import re
import shutil
from datetime import datetime
from pathlib import Path

import pytest
from babel.dates import format_datetime
from click.testing import CliRunner

from pocforge.report import render
from pocforge.report.i18n import untranslated
from pocforge.results.store import Run, RunStore
from pocforge.spec import load_poc
from tests.report.conftest import DATA

# The store's provenance runs git; the CLI test starts the CLI.
pytestmark = pytest.mark.process

REPORT_DATA = Path(__file__).resolve().parents[1] / "data" / "report"
FIGURE = re.compile(r'<script type="application/json" id="fig-([^"]+)">(.*?)</script>', re.S)


def _without_plotly(page: str) -> str:
    """The page with plotly's inlined bundle (the first ``<script>``) replaced by ``PLOTLY``."""
    start = page.index("<script>")
    end = page.index("</script>", start)
    return page[:start] + "<script>PLOTLY</script>" + page[end + len("</script>") :]


def _figures(page: str) -> dict[str, dict]:
    return {chart: json.loads(text) for chart, text in FIGURE.findall(page)}


def test_every_message_is_translated() -> None:
    """The zh-CN catalog has a translation, not fuzzy, for every message ``make i18n``
    extracts from the report's templates and Python."""
    missing = untranslated("zh-CN")
    assert missing == [], "untranslated in zh-CN: " + "; ".join(map(repr, missing))


def test_english_dashboard_is_byte_identical(tmp_path: Path) -> None:
    """The fixed run (tests/data/report/run-en with the pocforge-sweep-a sweep as its
    serving stage) renders exactly the page captured before the report was translatable."""
    run = tmp_path / "golden-run"
    shutil.copytree(REPORT_DATA / "run-en", run)
    shutil.copytree(DATA / "pocforge-sweep-a", run / "serving" / "chat")
    page = render(run, tmp_path / "en.html").read_text()
    golden = (REPORT_DATA / "dashboard-en.golden.html").read_text()
    assert _without_plotly(page) == golden


def test_chinese_dashboard_has_no_english_left(demo_run: Run) -> None:
    """Headings, the verdict banner, badges, notes and chart titles are in Chinese; the
    spec's and the tools' own text (metric keys, workload names) stays as written."""
    page = _without_plotly(render(demo_run.path, lang="zh-CN").read_text())
    assert '<html lang="zh-CN">' in page
    for text in ("执行摘要", "验收标准", "总体结论", "来源与环境", "注意事项", "推理服务 — chat"):
        assert text in page
    # the demo run holds serving only: four of its six criteria (training, kernels, parity)
    # cannot be decided
    assert re.search(
        r'<div class="verdict verdict-inconclusive" id="overall-verdict">\s*'
        r'<span class="label">总体结论</span>\s*<span class="value">无法判定</span>',
        page,
    )
    assert '<span class="badge badge-pass">通过</span>' in page  # CSS classes stay English
    assert '<span class="badge badge-inconclusive">无法判定</span>' in page
    assert "无法判定：6 项标准中 2 项通过、没有未通过项，4 项依据现有数据无法判定。" in page
    assert "本次运行使用的是 CPU 而非 GPU" in page  # a caveat built by render.py
    assert "serving.chat.ttft_ms.p90" in page and "all_reduce" in page
    for english in (
        "Executive summary",
        "Acceptance criteria",
        "Overall verdict",
        "Provenance",
        "Caveats",
        "Serving —",
        "INCONCLUSIVE",
        "inconclusive<",
        "CPUs, not GPUs",
        "Metric definitions",
    ):
        assert english not in page
    figures = _figures(page)
    titles = {chart: fig["layout"]["title"]["text"] for chart, fig in figures.items()}
    assert titles == {
        "pareto-chat": "吞吐量与交互性 — chat",
        "latency-chat": "各测试点的延迟分位数 — chat",
        "collectives": "集合通信总线带宽",
    }
    pareto = figures["pareto-chat"]
    assert pareto["layout"]["xaxis"]["title"]["text"] == "交互性（每用户输出 tokens/s）"
    assert "本次运行" in [trace["name"] for trace in pareto["data"]]


def test_cli_renders_chinese_beside_english_with_a_language_switch(demo_run: Run) -> None:
    """``--lang zh-CN`` writes dashboard.zh-CN.html beside the spec's dashboard.html;
    ``--lang en --lang zh-CN`` links each page to the other."""
    from pocforge.cli import main

    root = str(demo_run.path.parents[1])
    ref = f"demo/{demo_run.manifest.run_id}"
    res = CliRunner().invoke(main, ["report", ref, "--root", root, "--lang", "zh-CN"])
    assert res.exit_code == 0, res.output
    chinese = demo_run.path / "dashboard.zh-CN.html"
    assert chinese.is_file() and "执行摘要" in chinese.read_text()

    res = CliRunner().invoke(
        main, ["report", ref, "--root", root, "--lang", "en", "--lang", "zh-CN"]
    )
    assert res.exit_code == 0, res.output
    english = (demo_run.path / "dashboard.html").read_text()
    chinese_page = chinese.read_text()
    assert '<html lang="en">' in english and "Executive summary" in english
    assert re.search(r'<nav class="languages"><a href="dashboard\.zh-CN\.html"[^>]*>', english)
    assert re.search(r'<nav class="languages"><a href="dashboard\.html"[^>]*>', chinese_page)
    assert ">简体中文</a>" in english and ">English</a>" in chinese_page


def test_spec_language_makes_the_default_dashboard_chinese(store: RunStore) -> None:
    """A run whose spec says ``poc.language: zh-CN`` gets its dashboard.html in Chinese
    without any ``--lang``."""
    spec = load_poc("demo")
    spec = spec.model_copy(update={"poc": spec.poc.model_copy(update={"language": "zh-CN"})})
    run = store.create(spec)
    with run.stage("serving") as stage:
        stage.add_tree(DATA / "pocforge-sweep-a", "chat")
    run.finish()
    out = render(run.path)
    assert out == run.path / "dashboard.html"
    page = _without_plotly(out.read_text())
    assert '<html lang="zh-CN">' in page and "执行摘要" in page
    assert "Executive summary" not in page


def test_chinese_dashboard_formats_the_date_for_the_locale(demo_run: Run) -> None:
    """The header shows the run's creation time in Babel's zh_CN medium format (UTC)."""
    page = render(demo_run.path, lang="zh-CN").read_text()
    created = datetime.fromisoformat(demo_run.manifest.created_at.replace("Z", "+00:00"))
    shown = format_datetime(created, "medium", locale="zh_CN")
    assert re.match(r"\d{4}年\d{1,2}月\d{1,2}日 \d{2}:\d{2}:\d{2}$", shown)
    assert f"{shown} UTC" in page
    assert demo_run.manifest.created_at[:19].replace("T", " ") not in page


def test_verdict_notes_reach_the_chinese_caveats_translated(demo_run: Run) -> None:
    """The demo run has no training or kernel results: their criteria's notes (made in the
    results package, English in the CLI) are caveats in Chinese on the zh-CN page, with
    their values filled in."""
    from pocforge.report.i18n import gettext_for
    from pocforge.report.render import build

    _ = gettext_for("zh-CN")
    english = build(demo_run.path)["caveats"]
    chinese = build(demo_run.path, lang="zh-CN")["caveats"]
    assert any(c.endswith(": no training result") for c in english), english
    assert any(c.endswith(": " + _("no training result")) for c in chinese), chinese
    expected = _("no kernel result for {op}.{name}").format(op="rms_norm", name="max_rel_error")
    assert any(c.endswith(expected) for c in chinese), chinese
    assert not any("no training result" in c or "no kernel result" in c for c in chinese)


def test_a_dashboard_in_another_language_is_not_an_extra_file_of_the_run(demo_run: Run) -> None:
    """Dashboards are rebuilt from the run in any language: verify counts none of them."""
    from pocforge.results.verify import verify

    render(demo_run.path)
    render(demo_run.path, lang="zh-CN")
    report = verify(demo_run.path)
    assert not report.extra, report.extra
