"""From POC to product: `pocforge patch report` lists every example POC's patch with its
customer, reason and upstream state, the runs that carried it byte for byte, and its
judgment on the newest release checked; a run's dashboard shows the patches it ran with,
in English and in Chinese."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from pocforge.cli import main
from pocforge.frameworks.patching import parse_patch
from pocforge.frameworks.patching.against import Against, record
from pocforge.paths import pocs_dir
from pocforge.report.patches import markdown, rows
from pocforge.report.render import build, render
from pocforge.results.store import Run, RunStore
from pocforge.spec import load_poc
from tests.report.conftest import build_demo_run

DEMO_PATCH = "vllm/0001-collect-env-marker.patch"


def test_a_runs_dashboard_shows_the_patches_it_ran_with_in_both_languages(demo_run: Run):
    (section,) = [s for s in build(demo_run.path)["sections"] if s.id == "patches"]
    (patch,) = section.body["patches"]
    assert (patch.path, patch.framework, patch.version) == (DEMO_PATCH, "vllm", "0.32.0")
    assert (patch.state, patch.owner, patch.upstream) == ("carried", "pocforge maintainers", "none")
    english = render(demo_run.path, demo_run.path / "en.html").read_text()
    chinese = render(demo_run.path, demo_run.path / "zh.html", lang="zh-CN").read_text()
    assert "Patches: from POC to product" in english and DEMO_PATCH in english
    assert "补丁：从 POC 到产品" in chinese and DEMO_PATCH in chinese
    assert "Patches: from POC to product" not in chinese


def test_the_report_says_where_each_run_proved_a_patch_and_its_newest_release(
    store: RunStore, tmp_path: Path
):
    build_demo_run(store)  # a complete run of the demo POC, which carries the patch
    checked = tmp_path / "patch-status"
    for release in ("0.33.0", "0.34.0"):
        record("demo", [Against(DEMO_PATCH, "vllm", "0.32.0", release, "applies")], checked)
    (row,) = [r for r in rows(pocs_dir(), store.root, checked) if r.poc == "demo"]
    assert [(p.version, p.status) for p in row.proven] == [("0.32.0", "complete")]
    assert row.newest["release"] == "0.34.0" and row.customer == "pocforge self-test"
    text = markdown([row])
    assert "vllm 0.32.0: 1 run(s), 1 complete" in text
    assert "applies cleanly on vllm 0.34.0" in text and "| carried |" in text


def test_the_report_lists_every_patch_of_every_example_poc(tmp_path: Path):
    out = tmp_path / "por.md"
    done = CliRunner().invoke(main, ["patch", "report", "--out", str(out)])
    assert done.exit_code == 0, done.output
    text = out.read_text()
    patches = sorted(pocs_dir().glob("*/patches/*/*.patch"))
    assert patches, "the example POCs carry at least the demo's patch"
    for path in patches:
        spec = load_poc(path.parents[2].name)
        patch = parse_patch(path, path.parent.name)
        line = next(x for x in text.splitlines() if f"{path.parent.name}/{path.name}" in x)
        # | patch | POC | customer | why | serves | upstream | state | owner | proven | newest |
        cells = [cell.strip() for cell in line.split("|")[1:-1]]
        assert cells[1:4] == [spec.name, spec.poc.customer, " ".join(patch.description.split())]
        assert cells[5:7] == [
            patch.said("upstream") or "not said",
            patch.said("state") or "not said",
        ]
