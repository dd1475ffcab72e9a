"""verify catches missing, altered and extra files; a run killed mid-write still reads."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from pocforge.results.store import Run
from pocforge.results.verify import verify

# Starts a subprocess (git for provenance, patch, the CLI) or opens a local socket.
pytestmark = pytest.mark.process


def test_clean_run_verifies(demo_run: Run) -> None:
    report = verify(demo_run.path)
    assert report.ok and report.files >= 5 and not report.incomplete


def test_deleted_altered_extra(demo_run: Run) -> None:
    """Each kind of damage is named with its path."""
    (demo_run.path / "collectives" / "all_reduce.json").unlink()
    summary = demo_run.path / "serving" / "chat" / "summary.json"
    summary.write_bytes(summary.read_bytes().replace(b'"complete"', b'"completX"', 1))
    (demo_run.path / "serving" / "chat" / "notes.txt").write_text("added later")
    report = verify(demo_run.path)
    assert report.missing == ["collectives/all_reduce.json"]
    assert [a.path for a in report.altered] == ["serving/chat/summary.json"]
    assert report.extra == ["serving/chat/notes.txt"]
    assert not report.ok


def test_cli_exit_codes(demo_run: Run, store) -> None:
    from pocforge.cli.results import results_group

    runner = CliRunner()
    ok = runner.invoke(results_group, ["verify", demo_run.id, "--root", str(store.root)])
    assert ok.exit_code == 0 and "ok" in ok.output
    (demo_run.path / "provenance.json").write_text("{}")
    bad = runner.invoke(results_group, ["verify", demo_run.id, "--root", str(store.root)])
    assert bad.exit_code == 1 and "altered   provenance.json" in bad.output
    missing = runner.invoke(results_group, ["verify", "demo/nope", "--root", str(store.root)])
    assert missing.exit_code == 2 and "Traceback" not in missing.output


WRITER = """
import sys
from pathlib import Path
from pocforge.results.store import RunStore
run = RunStore(sys.argv[1]).create(None, poc="killed", run_id="r", provenance=False)
print("ready", flush=True)
with run.stage("serving") as st:
    for i in range(100000):
        st.write_json(f"chat/part-{i % 50}.json", {"i": i, "pad": "x" * 2000})
        st.append_jsonl("chat/rows.jsonl", [{"i": i}])
"""


@pytest.mark.parametrize("delay_s", [0.0, 0.15, 0.6])
def test_run_killed_mid_write_still_reports(tmp_path: Path, delay_s: float) -> None:
    """SIGKILL at some instant: verify names what is incomplete and the dashboard renders."""
    from pocforge.report.render import build, render_html

    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(delay_s)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    path = tmp_path / "killed" / "r"
    report = verify(path)
    assert not report.missing and not report.altered
    assert any("writer is gone" in line for line in report.incomplete)
    html = render_html(build(path))
    assert "Caveats" in html and "interrupted" in html
