"""serve.yml's inputs from a spec, without hosts: each node's rank command, the health URLs
of the plan, and benchmark command lines that ``pocforge bench serve`` itself accepts."""

from __future__ import annotations

import yaml

from pocforge.cli.bench import bench
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


def test_serve_vars_start_each_rank_and_bench_rank_zero(tmp_path):
    """Every node runs its own rank; the headless rank has no health URL; the sweep targets
    rank 0's address and parses with the bench verb's own options."""
    spec = two_node_spec(tmp_path)
    out = workload_vars(spec, "serve", pocforge="/kit/bin/pocforge")
    assert out["workload_command"] == (
        f"/kit/bin/pocforge launch {spec.source_file.resolve()} "
        "--node-rank {{ workload_node_rank }}"
    )
    assert out["workload_health_urls"] == {"0": "http://198.51.100.31:8000/health"}
    (argv,) = out["workload_benchmark_commands"]
    assert argv[:3] == ["/kit/bin/pocforge", "bench", "serve"]
    ctx = bench.commands["serve"].make_context("serve", argv[3:])
    assert ctx.params["base_url"] == "http://198.51.100.31:8000"
    assert ctx.params["concurrency"] == [1, 4] and ctx.params["num_prompts"] == 8
    assert ctx.params["slos"] == ("ttft_ms:p99:2000",) and ctx.params["out"] == "bench/chat"
    assert ctx.params["gpus"] == 16


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
