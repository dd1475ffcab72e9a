"""Faults inflicted on one real ``pocforge run`` of a tiny POC with kernels, serving (its
c4 point profiled) and DeepSpeed training, in this order: SIGKILL of its vLLM server
mid-sweep (the run fails), SIGKILL of ``pocforge run --resume`` at seeded instants, Ctrl-C
of a resume mid-sweep; then ``--resume`` runs it to the end, and what a whole run claims
(served, profiled, trained, reported, judged) is read from it.

After each kill: ``pocforge results verify`` reads the run (exit 0: cut off, not corrupt),
no request the server had finished before the kill is missing from the records (vLLM's
own ``vllm:request_success_total`` is the truth, less the sanity prompts), nothing the
killed attempt started is left running, and ``--resume`` completes the run. After Ctrl-C:
exit 130, no traceback, the way to resume printed, every finished request on disk, the
attempt kept beside the next.

One run takes every fault: a run per fault cost a vLLM start and a sweep more.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
import urllib.request
from datetime import datetime
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
        480 + 120 * INSTANTS,
        "a vLLM start and sweep, a resume killed at each seeded instant, one stopped with "
        "Ctrl-C, one to the end with training",
    ),
]
POCFORGE = str(Path(sys.executable).parent / "pocforge")
ENGINE_ARGS = {"enforce-eager": True, "max-num-seqs": 8}  # no torch.compile: 30 s less a start
# A request vLLM counted as finished this long before the kill has reached the client.
MARGIN_S = 0.3
# A run reaches its sweep's c1 point about 36 s after it starts, alone here (the kernels'
# check 5 s, vLLM healthy after 30 s: run.log), later beside the other worker: the kills
# land in the start, the gate and the sweep.
SPAN_S = (2.0, 60.0)
PROMPTS = 80  # per point


def tiny_poc(tmp_path: Path, name: str) -> Path:
    """Kernels, serving (c1 and c4, c4 profiled: eager, so its trace names the model's
    layers) and training."""
    return workspace(
        tmp_path,
        name,
        training=True,
        num_prompts=PROMPTS,
        concurrency=[1, 4],
        osl=16,
        engine_args=ENGINE_ARGS,
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
    ``--resume`` SIGKILLed at seeded instants; then a resume stopped with Ctrl-C once its
    c1 point has three records; then resumed to the end. Every figure the tests judge, and
    each attempt's output."""
    tmp_path = tmp_path_factory.mktemp("kill-run")
    root = tiny_poc(tmp_path, "faulted")
    facts: dict = {"seen": []}
    try:
        facts["server"] = _kill_the_server(root, tmp_path, facts["seen"])
        facts["runs"] = _kill_the_run(root, tmp_path, facts["server"]["run"], facts["seen"])
        facts["ctrl_c"] = _ctrl_c_mid_sweep(root, tmp_path, facts["runs"]["run"], facts["seen"])
        facts["final"] = _resume_to_the_end(root, tmp_path, facts["ctrl_c"]["run"], facts["seen"])
        yield facts
    finally:
        stop_our_servers(facts["seen"])


def _kill_the_server(root: Path, tmp_path: Path, seen: list[dict]) -> dict:
    log = tmp_path / "run.log"
    began = time.time()
    proc = start(root, "faulted", None, log)
    run = _three_records(root, proc, log, began)
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
    """``pocforge run --resume`` of ``run`` SIGKILLed at INSTANTS seeded instants; the
    per-kill checks are asserted as they happen. The run the last kill left, if any."""
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
    return {
        "kills": kills,
        "readable": readable,
        "lost": lost,
        "finished_early": finished_early,
        "served_total": served_total,
        "run": run,
    }


def _three_records(root: Path, proc: subprocess.Popen, log: Path, began: float) -> Path:
    """The run ``proc`` serves, once its serving attempt (started at or after ``began``) has
    three successful records and ``proc`` is still running."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        run = the_run(root, "faulted")
        stage = json.loads((run / "run.json").read_text())["stages"].get("serving") if run else None
        started = (stage or {}).get("started_at")
        since = started is not None and datetime.fromisoformat(started).timestamp() >= began - 1
        if since and recorded(run / "serving")[0] >= 3 and proc.poll() is None:
            return run
        time.sleep(0.1)
    pytest.fail("the sweep never got under way: " + log.read_text()[-3000:])


def _ctrl_c_mid_sweep(root: Path, tmp_path: Path, run: Path | None, seen: list[dict]) -> dict:
    """``--resume`` of ``run`` (a fresh run if the kills left none), SIGINT once its c1
    point has three records: what it said and left."""
    log = tmp_path / "ctrl-c.log"
    began = time.time()
    proc = start(root, "faulted", run, log)
    try:
        run = _three_records(root, proc, log, began)
        due = served_requests(run) or 0
        time.sleep(MARGIN_S)
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    seen += server_pids(run)
    return {
        "code": code,
        "output": log.read_text(),
        "manifest": json.loads((run / "run.json").read_text()),
        "due": due,
        "kept": len((run / "serving" / "chat" / "requests-c1.jsonl").read_text().splitlines()),
        "run": run,
    }


def _resume_to_the_end(root: Path, tmp_path: Path, run: Path, seen: list[dict]) -> dict:
    final = start(root, "faulted", run, tmp_path / "final.log")
    code = final.wait(timeout=900)
    run = the_run(root, "faulted")
    seen += server_pids(run)
    output = (tmp_path / "final.log").read_text()
    return {"code": code, "output": output, "run": run, "verify": verify(root, run)}


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
    resumed = faulted["final"]  # the run the server's kill failed, completed by --resume
    assert resumed["code"] == 0 and "overall: PASS" in resumed["output"], resumed["output"][-3000:]
    if not faulted["runs"]["finished_early"]:  # else an attempt finished it before its instant
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
    runs, final = faulted["runs"], faulted["final"]
    output = final["output"]
    assert final["code"] == 0, output[-3000:]
    assert "overall: PASS" in output and "Traceback" not in output
    assert runs["kills"] == INSTANTS  # each landed in a run, however short the runs are
    run = final["run"]
    manifest = json.loads((run / "run.json").read_text())
    assert manifest["status"] == "complete"
    attempts = {n: s["status"] for n, s in manifest["stages"].items() if n.startswith("serving.")}
    # each cut-off attempt is kept: interrupted by a kill or Ctrl-C, or failed by the server's
    assert set(attempts.values()) <= {"interrupted", "failed"}, attempts
    assert final["verify"].returncode == 0, final["verify"].stdout + final["verify"].stderr
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


def test_ctrl_c_of_pocforge_run_mid_sweep_keeps_every_finished_request(faulted, fault_table):
    """Ctrl-C: exit 130, no traceback, the way to resume printed, the run and its serving
    stage interrupted with every finished request on disk (the stage before it kept); the
    next resume kept that attempt beside its own."""
    stopped = faulted["ctrl_c"]
    assert stopped["code"] == 130, stopped["output"][-3000:]
    assert "Traceback" not in stopped["output"] and "--resume" in stopped["output"]
    m = stopped["manifest"]
    assert m["status"] == "interrupted" and m["stages"]["serving"]["status"] == "interrupted"
    assert m["stages"]["kernels"]["status"] == "complete"
    assert 3 <= stopped["kept"] < PROMPTS  # the sweep did not finish
    assert stopped["due"] <= stopped["kept"], stopped  # vLLM's finished requests are records
    stages = json.loads((faulted["final"]["run"] / "run.json").read_text())["stages"]
    last = max((n for n in stages if n.startswith("serving.attempt-")), key=lambda n: int(n[16:]))
    assert stages[last]["status"] == "interrupted"
    first = faulted["final"]["run"] / last / "chat" / "requests-c1.jsonl"
    assert len(first.read_text().splitlines()) == stopped["kept"]
    fault_table.add(
        FaultRow(
            "Ctrl-C of `pocforge run` mid-sweep",
            tried=1,
            readable=1,
            lost=max(0, stopped["due"] - stopped["kept"]),
            resumed=1,
            note=f"exit 130; {stopped['kept']} records kept as {last}",
        )
    )


def test_the_resumed_run_serves_profiles_trains_reports_and_judges(faulted):
    result = faulted["final"]
    run = result["run"]
    assert result["code"] == 0, result["output"][-3000:]
    assert "overall: PASS" in result["output"]
    assert "kernels: complete" in result["output"]  # done before the faults, not redone

    m = json.loads((run / "run.json").read_text())
    assert m["status"] == "complete"
    main = {k: v["status"] for k, v in m["stages"].items() if "." not in k}
    assert main == {"kernels": "complete", "serving": "complete", "training": "complete"}
    kernels = json.loads((run / "kernels" / "results.json").read_text())
    assert kernels["timed"] is False and all(row["ok"] for row in kernels["rows"])
    summary = json.loads((run / "serving" / "chat" / "summary.json").read_text())
    assert [p["status"] for p in summary["points"]] == ["ok", "ok"]
    records = (run / "serving" / "chat" / "requests-c1.jsonl").read_text().splitlines()
    assert len(records) == PROMPTS
    # the profiled point's traces: vLLM's Chrome trace names the model's own layers
    profile = run / "serving" / "chat" / "profile-c4"
    (trace,) = profile.glob("rank0.*.pt.trace.json.gz")
    with gzip.open(trace) as handle:
        events = json.load(handle)["traceEvents"]
    assert any(e.get("name", "").startswith("nn.Module: LlamaDecoderLayer") for e in events)
    assert any(e.get("cat") == "cpu_op" for e in events)
    # the kit's sum of that trace (what the page shows where vLLM's table is lost) has the
    # layers too, and where vLLM wrote its table, the same first operation with its figures
    from pocforge.report import trace_ops
    from pocforge.report.ops_table import read_table

    summed = trace_ops.summarize(trace, 10_000).ops
    assert any(r["Name"].startswith("nn.Module: LlamaDecoderLayer") for r in summed.rows)
    if list(profile.glob("rank0.profiler_out.txt")):
        (vllms,) = read_table(profile / "rank0.profiler_out.txt").rows[:1]
        assert summed.rows[0]["Name"].startswith(vllms["Name"].removesuffix("..."))
        assert [summed.rows[0][k] for k in summed.columns] == [vllms[k] for k in summed.columns]
    else:  # the profiler's top-ops table
        # vLLM sums the trace into it (torch's key_averages) and logs when that fails (seen
        # here once: a UnicodeDecodeError inside torch); then the kit names it missing,
        # with vLLM's line, without waiting out the settle
        log = (run / "serving" / "server.log").read_text(errors="replace")
        assert "Failed to stop profiler" in log, "no table, and vLLM logged no failure"
        assert "profile: c4: no table from ['rank0']: " in result["output"]
        # and the dashboard shows the table the kit summed from the worker's own trace
        page = (run / "dashboard.html").read_text()
        assert "this one is summed by pocforge from its trace" in page
        assert f"<code>{trace.name}</code></a>" in page.split('id="profile-chat"')[1]
    assert not list((run / "serving" / "chat" / "profile-c1").glob("*"))  # c1 not profiled
    training = json.loads((run / "training" / "summary.json").read_text())
    assert training["world_size"] == 2 and len(training["loss_curve"]) == 3
    # the profiled training steps: a trace per rank that names the model's layers
    for rank in (0, 1):
        trace = run / "training" / "profile" / f"rank{rank}.pt.trace.json.gz"
        with gzip.open(trace) as handle:
            names = {e.get("name", "") for e in json.load(handle)["traceEvents"]}
        assert "LlamaDecoderLayer model.layers.0" in names, rank
        assert "aten::mm" in names or "aten::addmm" in names
        table = (run / "training" / "profile" / f"rank{rank}.profiler_out.txt").read_text()
        assert "Self CPU time total" in table
    assert (run / "dashboard.html").stat().st_size > 100_000  # plotly inlined: works offline
    # the planner closes the loop on this machine: its CPU entry predicted every sweep point
    # and the training run before they ran, and the dashboard reports its error (not that
    # the error is small: a 2-layer model on 2 cores is host-bound)
    plan = json.loads((run / "plan.json").read_text())
    points = plan["serving"]["workloads"][0]["points"]
    assert [p["concurrency"] for p in points] == [1, 4] and all(p["fits"] for p in points)
    assert plan["training"]["prediction"]["tokens_per_s_per_gpu"] > 0
    html = (run / "dashboard.html").read_text()
    assert "Planner: predicted vs measured" in html and "Median absolute throughput error" in html
    assert 'id="profile-training"' in html and "rank0.pt.trace.json.gz" in html
    assert result["verify"].returncode == 0, result["verify"].stdout + result["verify"].stderr
