"""The DeepEP tests the collectives stage runs for a POC: the expert-parallel POCs get
DeepEP's (ROCm/DeepEP's on AMD) dispatch/combine tests at their model's shape, in the
collectives role's variables; a dense POC, or a CPU cluster, gets none."""

from __future__ import annotations

from pathlib import Path

from pocforge.cluster.ep_alltoall import ep_tests, expert_parallel_size
from pocforge.runner.cluster import Nodes, collectives_vars
from pocforge.spec import load_poc

DEEPSEEK = "--num-processes 8 --hidden 7168 --num-topk 8 --num-experts 256"


def _vars(name: str) -> dict:
    return collectives_vars(load_poc(name), None, Nodes(inventory=Path("inventory.yml")))


def _with(spec, *, gpu: str | None = None, experts: int | None = None):
    update = {}
    if gpu:
        update["cluster"] = spec.cluster.model_copy(update={"gpu": gpu})
    if experts:
        facts = spec.model.facts.model_copy(update={"experts": experts})
        update["model"] = spec.model.model_copy(update={"facts": facts})
    return spec.model_copy(update=update)


def test_disaggregated_pools_within_a_node() -> None:
    """DeepSeek-R1 P/D on 2x8 MI355X, each pool ep 8 on its own node: ROCm/DeepEP's
    intranode and low-latency tests on every node with R1's shape; no internode run, no
    expert-parallel group spans nodes."""
    spec = load_poc("deepseek-r1-fp8-mi355x-sglang-pd")
    assert expert_parallel_size(spec) == 8
    assert _vars("deepseek-r1-fp8-mi355x-sglang-pd")["collectives_ep_tests"] == [
        {"name": "intranode", "script": "tests/test_intranode.py", "args": DEEPSEEK},
        {"name": "low_latency", "script": "tests/test_low_latency.py", "args": DEEPSEEK},
    ]


def test_aggregated_ep16_spans_the_nodes() -> None:
    """DeepSeek-V3 with ep 16 over 2x8 MI355X: internode and low latency across both nodes
    (256 experts divide 16 ranks), intranode on each."""
    tests = _vars("deepseek-v3-fp8-mi355x-sglang")["collectives_ep_tests"]
    assert tests == [
        {"name": "intranode", "script": "tests/test_intranode.py", "args": DEEPSEEK},
        {"name": "internode", "script": "tests/test_internode.py", "args": DEEPSEEK,
         "across_nodes": True},
        {"name": "low_latency", "script": "tests/test_low_latency.py", "args": DEEPSEEK,
         "across_nodes": True},
    ]  # fmt: skip


def test_nvidia_runs_deepseeks_own_tests() -> None:
    """On H200 the tests are deepseek-ai/DeepEP's, in tests/legacy/ since EPv2."""
    spec = _with(load_poc("deepseek-v3-fp8-mi355x-sglang"), gpu="H200")
    assert [t["script"] for t in ep_tests(spec)] == [
        "tests/legacy/test_intranode.py",
        "tests/legacy/test_internode.py",
        "tests/legacy/test_low_latency.py",
    ]


def test_experts_are_rounded_up_to_the_ranks() -> None:
    """DeepEP asserts num_experts % num_ranks == 0: 60 experts run as 64 over 8 or 16 ranks,
    72 over 8 ranks but 80 over 16."""
    spec = load_poc("deepseek-v3-fp8-mi355x-sglang")
    flags = {t["name"]: t["args"].split()[-1] for t in ep_tests(_with(spec, experts=60))}
    assert flags == {"intranode": "64", "internode": "64", "low_latency": "64"}
    flags = {t["name"]: t["args"].split()[-1] for t in ep_tests(_with(spec, experts=72))}
    assert flags == {"intranode": "72", "internode": "80", "low_latency": "80"}


def test_dense_and_cpu_pocs_get_none() -> None:
    """No expert parallelism, or no GPU: the role's list stays at its empty default."""
    assert "collectives_ep_tests" not in _vars("llama-3.1-70b-bf16-mi300x-vllm")
    assert "collectives_ep_tests" not in _vars("llama-3.1-70b-fp8-h200-vllm-pd")
    cpu = _with(load_poc("deepseek-v3-fp8-mi355x-sglang"), gpu="cpu")
    assert ep_tests(cpu) == []
