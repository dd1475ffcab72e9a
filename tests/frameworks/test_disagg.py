"""Disaggregated launch plans (``pocforge.frameworks.disagg``): pools on their GPUs, the KV
connection per framework, the router in front; checked by vLLM's and SGLang's own parsers."""

from __future__ import annotations

import json

import pytest

from pocforge.frameworks import ADAPTERS, LaunchContext, plan_all
from pocforge.frameworks.argcheck.run import ArgcheckUnavailable
from pocforge.spec import load_spec

from ..conftest import REPO

CTX = LaunchContext(repo=REPO, python="python", sglang_python="python")


def plan(name: str, **env):
    spec = load_spec(REPO / "pocs" / name / "poc.yaml")
    return plan_all(spec, CTX)


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


@pytest.fixture
def h200(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    return plan("llama-3.1-70b-fp8-h200-vllm-pd")


def test_vllm_nixl_pools_share_a_node_on_disjoint_gpus_and_ports(h200):
    """2 × TP2 prefill and 1 × TP4 decode on one 8-GPU node: GPUs 0-1, 2-3, 4-7; HTTP ports
    above the router's; one NIXL handshake port each; kv_both as vLLM's NIXL guide runs it."""
    servers, router = h200[:-1], h200[-1]
    assert [(s.role, s.instance) for s in servers] == [
        ("prefill", 0),
        ("prefill", 1),
        ("decode", 0),
    ]
    assert [s.env["CUDA_VISIBLE_DEVICES"] for s in servers] == ["0,1", "2,3", "4,5,6,7"]
    assert [flag(s.argv, "--port") for s in servers] == ["8001", "8002", "8003"]
    assert [s.env["VLLM_NIXL_SIDE_CHANNEL_PORT"] for s in servers] == ["5600", "5601", "5602"]
    assert [flag(s.argv, "--tensor-parallel-size") for s in servers] == ["2", "2", "4"]
    for server in servers:
        config = json.loads(flag(server.argv, "--kv-transfer-config"))
        assert config == {
            "kv_connector": "NixlConnector",
            "kv_role": "kv_both",
            "kv_buffer_device": "cuda",
        }
    assert (
        "--max-num-batched-tokens" in servers[0].argv
        and "--max-num-batched-tokens" not in servers[2].argv
    )
    assert router.role == "router" and flag(router.argv, "--port") == "8000"
    assert (
        router.argv.count("--prefill") == 2 and flag(router.argv, "--protocol") == "NixlConnector"
    )
    assert flag(router.argv, "--decode") == "http://h200-01.poc.example.com:8003"


def test_sglang_mori_pools_on_their_own_nodes():
    """DeepSeek-R1 on 2 × 8 MI355X: prefill on node 0 with a bootstrap port, decode
    (DP-attention) on node 1; MoRI for the KV and for the MoE all-to-all; the router speaks
    SGLang's bootstrap protocol."""
    prefill, decode, router = plan("deepseek-r1-fp8-mi355x-sglang-pd")
    assert (prefill.node_rank, decode.node_rank, router.node_rank) == (0, 1, 0)
    assert flag(prefill.argv, "--disaggregation-mode") == "prefill"
    assert flag(decode.argv, "--disaggregation-mode") == "decode"
    for server in (prefill, decode):
        assert flag(server.argv, "--disaggregation-transfer-backend") == "mori"
        assert flag(server.argv, "--moe-a2a-backend") == "mori"
        assert "HIP_VISIBLE_DEVICES" not in server.env  # a whole node each
    assert flag(prefill.argv, "--disaggregation-bootstrap-port") == "8998"
    assert "--disaggregation-bootstrap-port" not in decode.argv
    # the POC's SGLang 0.5.20 has no --attn-dp-size (0.5.22 on)
    assert flag(decode.argv, "--dp-size") == "8" and "--enable-dp-attention" in decode.argv
    assert flag(router.argv, "--protocol") == "sglang"
    assert flag(router.argv, "--prefill") == "http://198.51.100.11:8001"
    assert flag(router.argv, "--bootstrap-port") == "8998"


def test_cpu_pair_binds_its_own_core_and_shares_a_kv_folder():
    prefill, decode, router = plan("tiny-llama-fp32-cpu-vllm-pd")
    assert (prefill.env["VLLM_CPU_OMP_THREADS_BIND"], decode.env["VLLM_CPU_OMP_THREADS_BIND"]) == (
        "0",
        "1",
    )
    roles = [json.loads(flag(s.argv, "--kv-transfer-config"))["kv_role"] for s in (prefill, decode)]
    assert roles == ["kv_producer", "kv_consumer"]
    paths = {
        json.loads(flag(s.argv, "--kv-transfer-config"))["kv_connector_extra_config"][
            "shared_storage_path"
        ]
        for s in (prefill, decode)
    }
    assert paths == {"/tmp/pocforge-kv"}
    assert router.argv[:3] == ["python", "-m", "pocforge.frameworks.pd_router"]


@pytest.mark.integration
def test_vllms_own_parser_accepts_every_pool(h200):
    """vLLM 0.32's parser (and its KVTransferConfig) on each instance's arguments, and it
    refuses a connector role it does not know: one check of them all (one process importing
    vLLM), where only that instance is refused."""
    ctx = LaunchContext.local(REPO)
    cpu = plan("tiny-llama-fp32-cpu-vllm-pd")
    bad = plan("tiny-llama-fp32-cpu-vllm-pd")[0]  # a copy of cpu[0]
    index = bad.check_args.index("--kv-transfer-config") + 1
    bad.check_args[index] = bad.check_args[index].replace("kv_producer", "kv_sender")
    try:
        ((refused, message),) = ADAPTERS["vllm"].check([*h200, *cpu, bad], ctx)
    except ArgcheckUnavailable as exc:
        pytest.skip(str(exc))
    assert refused is bad and "kv_sender" in message


@pytest.mark.integration
def test_sglangs_own_parser_accepts_both_pools():
    ctx = LaunchContext.local(REPO)
    launches = plan("deepseek-r1-fp8-mi355x-sglang-pd")
    try:
        assert ADAPTERS["sglang"].check(launches, ctx) == []
    except ArgcheckUnavailable as exc:
        pytest.skip(str(exc))
