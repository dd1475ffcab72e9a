"""SIGKILL of the vLLM server mid-sweep, then of ``pocforge run`` itself at seeded instants.

After each kill: ``pocforge results verify`` reads the run (exit 0: cut off, not corrupt),
no request the server had finished before the kill is missing from the records (vLLM's
own ``vllm:request_success_total`` is the truth, less the sanity prompts), nothing the
killed attempt started is left running, and ``--resume`` completes the run.

One run takes both faults, in that order (the server's kill fails the run; the resumes
that follow are what ``pocforge run`` is killed in): a run per fault cost a vLLM start
and a whole sweep more.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from pocforge.bench.promscrape import parse_metrics
from pocforge.bench.records import RequestRecord
from pocforge.frameworks.process import start_ticks
from tests.tinypoc import workspace

from .conftest import INSTANTS, SEED, FaultRow

pytestmark = [
    pytest.mark.integration,
    pytest.mark.budget(
        180 + 120 * INSTANTS, "a vLLM start and sweep, then a resume killed at each seeded instant"
    ),
]
POCFORGE = str(Path(sys.executable).parent / "pocforge")
ENGINE_ARGS = {"enforce-eager": True, "max-num-seqs": 8}  # no torch.compile: 30 s less a start
# A request vLLM counted as finished this long before the kill has reached the client.
MARGIN_S = 0.3
# An uninterrupted run here takes about 70-80 s (a 40-50 s eager vLLM start, a 25 s
# sweep): the kills land in the start, the sanity gate, the sweep and the report.
SPAN_S = (2.0, 60.0)


def tiny_poc(tmp_path: Path, name: str) -> Path:
    return workspace(
        tmp_path,
        name,
        training=False,
        num_prompts=80,
        concurrency=[1, 4],
        osl=16,
        engine_args=ENGINE_ARGS,
        profile=False,
        warmup=0,
    )


def the_run(root: Path, name: str) -> Path | None:
    runs = sorted((root / "results" / name).glob("*/run.json"))
    return runs[-1].parent if runs else None


def server_url(run: Path) -> str | None:
    log = run / "serving" / "server.log"
    found = (
        re.search(r"Starting vLLM server on (http://\S+)", log.read_text())
        if log.exists()
        else None
    )
    return found.group(1) if found else None


def served_requests(run: Path) -> int | None:
    """vLLM's count of finished requests that became records: all it finished, less the
    sanity prompts (None when the server does not answer yet)."""
    url = server_url(run)
    if url is None:
        return None
    try:
        with urllib.request.urlopen(url + "/metrics", timeout=2) as answer:
            done = parse_metrics(answer.read().decode()).get("vllm:request_success_total", 0.0)
    except OSError:
        return None
    sanity = run / "serving" / "sanity.json"
    if not sanity.exists():
        return 0  # the sanity prompts are all it has finished: no record is due yet
    return max(0, int(done) - len(json.loads(sanity.read_text())["answers"]))


def recorded(stage: Path) -> tuple[int, int]:
    """Successful records under ``stage``, and lines that do not parse (a torn write)."""
    ok = torn = 0
    for path in stage.glob("*/requests-*.jsonl"):
        for line in path.read_text().splitlines():
            try:
                ok += RequestRecord.model_validate_json(line).success
            except ValueError:
                torn += 1
    return ok, torn


def server_pids(run: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in run.glob("serving*/**/*.log.pid")]


def still_running(record: dict) -> bool:
    started = record["start_ticks"]
    return started is not None and start_ticks(record["pid"]) == started


def verify(root: Path, run: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [POCFORGE, "results", "verify", str(run)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )


def start(root: Path, name: str, run: Path | None, log: Path) -> subprocess.Popen:
    cmd = [POCFORGE, "run", name] + (["--resume", run.name] if run else [])
    return subprocess.Popen(cmd, cwd=root, stdout=log.open("w"), stderr=subprocess.STDOUT)


def stop_our_servers(pids: list[dict]) -> None:
    """Test cleanup: any server our runs started that is somehow still up (by pid)."""
    for record in pids:
        if still_running(record):
            os.killpg(record["pid"], signal.SIGKILL)


@pytest.fixture(scope="module")
def faulted(tmp_path_factory):
    """The POC run, its server SIGKILLed once three requests are records; then its
    ``--resume`` SIGKILLed at seeded instants; then resumed to the end. Every figure the
    two tests judge, and each attempt's output."""
    tmp_path = tmp_path_factory.mktemp("kill-run")
    root = tiny_poc(tmp_path, "faulted")
    facts: dict = {"seen": []}
    try:
        facts["server"] = _kill_the_server(root, tmp_path, facts["seen"])
        facts["runs"] = _kill_the_run(root, tmp_path, facts["server"]["run"], facts["seen"])
        yield facts
    finally:
        stop_our_servers(facts["seen"])


def _kill_the_server(root: Path, tmp_path: Path, seen: list[dict]) -> dict:
    log = tmp_path / "run.log"
    proc = start(root, "faulted", None, log)
    run = None
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        run = the_run(root, "faulted")
        if run and recorded(run / "serving")[0] >= 3:
            break
        time.sleep(0.1)
    assert run is not None and proc.poll() is None, log.read_text()[-3000:]
    (server,) = server_pids(run)
    seen.append(server)
    due = served_requests(run) or 0
    time.sleep(MARGIN_S)
    os.kill(server["pid"], signal.SIGKILL)
    code = proc.wait(timeout=300)
    ok, torn = recorded(run / "serving")
    return {
        "run": run,
        "server": server,
        "code": code,
        "output": log.read_text(),
        "due": due,
        "ok": ok,
        "torn": torn,
        "stage": json.loads((run / "run.json").read_text())["stages"]["serving"],
        "verify": verify(root, run).returncode,
        "left_running": still_running(server),
    }


def _kill_the_run(root: Path, tmp_path: Path, run: Path | None, seen: list[dict]) -> dict:
    """``pocforge run --resume`` of ``run`` SIGKILLed at INSTANTS seeded instants, then
    resumed to the end; the per-kill checks are asserted as they happen."""
    rng = random.Random(SEED)
    kills = readable = lost = finished_early = served_total = 0
    # stratified: one instant in each of INSTANTS equal slices of the span, in a seeded
    # order, so even a few kills land in the start, the sweep and the report. An attempt
    # that finishes before its instant shows a whole run is shorter than the span: the
    # span shrinks to it and that slice is drawn again, so INSTANTS kills land in a run
    fractions = [(i + rng.random()) / INSTANTS for i in range(INSTANTS)]
    rng.shuffle(fractions)
    span_end = SPAN_S[1]
    attempt = 0
    while fractions and attempt < 2 * INSTANTS:
        k, attempt = attempt, attempt + 1
        fraction = fractions.pop(0)
        instant = SPAN_S[0] + fraction * (span_end - SPAN_S[0])
        proc = start(root, "faulted", run, tmp_path / f"attempt-{k}.log")
        began = time.monotonic()
        while proc.poll() is None and time.monotonic() - began < instant - MARGIN_S:
            time.sleep(0.05)
        run = the_run(root, "faulted")
        due = served_requests(run) if run and proc.poll() is None else None
        time.sleep(MARGIN_S)
        if proc.poll() is not None:  # finished before its instant: the next starts afresh
            assert proc.returncode == 0, (tmp_path / f"attempt-{k}.log").read_text()[-3000:]
            finished_early += 1
            span_end = max(SPAN_S[0] + 1.0, min(span_end, time.monotonic() - began))
            fractions.append(fraction)
            run = None
            continue
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        kills += 1
        if run is None:  # killed before it had created its run: nothing to check
            readable += 1
            continue
        seen += server_pids(run)
        ok, torn = recorded(run / "serving")
        served_total += due or 0
        lost += max(0, (due or 0) - ok)
        assert torn == 0, f"kill {k} at {instant:.1f} s: a torn record"
        assert (due or 0) <= ok, f"kill {k} at {instant:.1f} s: {due} served, {ok} recorded"
        checked = verify(root, run)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert "Traceback" not in checked.stdout + checked.stderr
        readable += 1
    final = start(root, "faulted", run, tmp_path / "final.log")
    code = final.wait(timeout=900)
    run = the_run(root, "faulted")
    seen += server_pids(run)
    return {
        "kills": kills,
        "readable": readable,
        "lost": lost,
        "finished_early": finished_early,
        "served_total": served_total,
        "code": code,
        "output": (tmp_path / "final.log").read_text(),
        "run": run,
    }


def test_sigkill_of_the_server_mid_sweep(faulted, fault_table):
    killed = faulted["server"]
    output = killed["output"]
    assert killed["code"] == 1, output[-3000:]
    assert "Traceback" not in output
    assert "exited" in output or "failed" in output
    assert killed["torn"] == 0 and killed["ok"] >= killed["due"]
    assert killed["stage"]["status"] == "failed"
    assert killed["verify"] == 0
    assert not killed["left_running"]  # the group is gone with it: nothing left behind
    resumed = faulted["runs"]  # the run the server's kill failed, completed by --resume
    assert resumed["code"] == 0 and "overall: PASS" in resumed["output"], resumed["output"][-3000:]
    if not resumed["finished_early"]:  # else an attempt finished it before its instant
        assert resumed["run"] == killed["run"]
    fault_table.add(
        FaultRow(
            "SIGKILL of the vLLM server mid-sweep",
            tried=1,
            readable=1,
            lost=max(0, killed["due"] - killed["ok"]),
            resumed=1,
            note=f"the stage failed naming the exit; {killed['ok']} records kept",
        )
    )


def test_sigkill_of_pocforge_run_at_seeded_instants(faulted, fault_table):
    runs = faulted["runs"]
    output = runs["output"]
    assert runs["code"] == 0, output[-3000:]
    assert "overall: PASS" in output and "Traceback" not in output
    assert runs["kills"] == INSTANTS  # each landed in a run, however short the runs are
    run = runs["run"]
    manifest = json.loads((run / "run.json").read_text())
    assert manifest["status"] == "complete"
    attempts = {n: s["status"] for n, s in manifest["stages"].items() if n.startswith("serving.")}
    # each cut-off attempt is kept: interrupted by a kill, or failed by the server's
    assert set(attempts.values()) <= {"interrupted", "failed"}, attempts
    root = run.parent.parent.parent
    assert verify(root, run).returncode == 0
    assert not list(run.rglob("*.log.pid"))  # every server stopped, its record gone
    assert not [p for p in faulted["seen"] if still_running(p)], "a killed attempt's server runs"
    fault_table.add(
        FaultRow(
            "SIGKILL of `pocforge run`",
            tried=runs["kills"],
            readable=runs["readable"],
            lost=runs["lost"],
            resumed=runs["kills"],
            note=f"{runs['served_total']} requests served before the kills; "
            f"{runs['finished_early']} run(s) finished before their instant (drawn again "
            "within a whole run's length)",
        )
    )
