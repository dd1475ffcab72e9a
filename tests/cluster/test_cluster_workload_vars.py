"""serve.yml's inputs from a spec, without hosts: each node's planned launches in the
deployment's runtime, the health URLs of the plan, the process manager the nodes run."""

from __future__ import annotations

from pathlib import Path

import yaml

from pocforge.cluster.events import CheckRecord
from pocforge.cluster.records import health_check
from pocforge.cluster.workload import workload_vars
from pocforge.spec import load_spec


def two_node_spec(tmp_path):
    spec = {
        "poc": {"name": "two", "customer": "c", "owner": "o"},
        "model": {"id": "org/m", "served_name": "m", "facts": {"experts": 0}},
        "cluster": {
            "gpu": "H200",
            "nodes": 2,
            "gpus_per_node": 8,
            "hosts": [
                {"name": "a", "address": "198.51.100.31"},
                {"name": "b", "address": "198.51.100.32"},
            ],
        },
        "serving": {
            "framework": "vllm",
            "parallelism": {"tp": 8, "dp": 2},
            "workloads": [
                {
                    "name": "chat",
                    "dataset": {"kind": "random", "isl": 64, "osl": 32},
                    "load": {"concurrency": [1, 4]},
                    "num_prompts": 8,
                    "slos": [{"metric": "ttft_ms", "percentile": 99, "max_ms": 2000}],
                }
            ],
        },
    }
    path = tmp_path / "two" / "poc.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(spec))
    return load_spec(path)


def test_serve_vars_plan_each_node_in_its_runtime(tmp_path):
    """Each node gets its own launches, planned here in the deployment's runtime (vLLM on
    H200: the CUDA container), the node's platform variables inside the container's
    environment; only rank 0 (the API server) has a health URL; the nodes run the kit's
    process manager, copied from this checkout."""
    spec = two_node_spec(tmp_path)
    node_env = {0: {"NCCL_SOCKET_IFNAME": "ens1f0"}, 1: {"NCCL_SOCKET_IFNAME": "ens2f0"}}
    out = workload_vars(spec, "serve", env={"NCCL_DEBUG": "WARN"}, node_env=node_env)
    assert sorted(out["workload_plans"]) == ["0", "1"]
    for rank, iface in (("0", "ens1f0"), ("1", "ens2f0")):
        (launch,) = out["workload_plans"][rank]
        argv = launch["argv"]
        assert argv[:2] == ["docker", "run"] and "--gpus" in argv
        assert f"NCCL_SOCKET_IFNAME={iface}" in argv and "NCCL_DEBUG=WARN" in argv
        assert launch["node_rank"] == int(rank)
    assert "--headless" in out["workload_plans"]["1"][0]["runtime"]["inner_argv"]
    assert out["workload_health_urls"] == {"0": "http://198.51.100.31:8000/health"}
    assert Path(out["workload_launcher"]).name == "node_launcher.py"
    names = {Path(one).name for one in out["workload_launcher_files"]}
    assert names == {"node_launcher.py", "process.py", "launch_plan.py", "profilers.py"}
    assert all(Path(one).is_file() for one in out["workload_launcher_files"])
    assert Path(out["workload_launcher"]).is_file()
    assert out["workload_health_timeout_s"] == out["workload_timeout_s"] + 120


def test_health_cell_names_value_with_unit():
    rec = CheckRecord(
        host="h2",
        check="all_reduce_intra_busbw",
        status="fail",
        measured=293.07,
        threshold=">= 300.1",
        message="m",
        unit="GB/s",
    )
    cell = health_check(rec)
    assert (cell.host, cell.status, cell.value, cell.detail) == ("h2", "fail", "293.07 GB/s", "m")
