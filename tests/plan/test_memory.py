"""Memory per GPU: weights and KV cache against hand-computed numbers, ZeRO model states
against DeepSpeed's own estimators term for term, and validate's rule that a serving
layout holds the model (``serving_fits_memory``)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import yaml

from pocforge.catalog import catalog_entry
from pocforge.plan import Device, Layout, Shape, memory
from pocforge.spec import SpecError, load_spec
from pocforge.spec.serving_rules import serving_fits_memory

from ..conftest import REPO

BF16 = 2


def shape(name: str) -> Shape:
    return Shape(catalog_entry(name))


# --------------------------------------------------------------------------- weights, KV cache
def test_llama3_70b_bf16_weights_are_141_gb():
    """70.55 B parameters × 2 bytes: 141.1 GB of bf16 weights (within 1%)."""
    assert memory.model_weight_bytes(shape("llama-3-70b"), "bf16") == pytest.approx(
        141.1e9, rel=0.01
    )


def test_fp8_weights_are_about_half_of_bf16():
    """fp8 halves every linear layer; only the embedding and LM head (2 × 1.05 B
    parameters) stay in bf16."""
    s = shape("llama-3-70b")
    bf16, fp8 = (memory.model_weight_bytes(s, p) for p in ("bf16", "fp8"))
    ends = 2 * s.embedding_params  # untied: embedding and head
    assert fp8 == pytest.approx(bf16 / 2 + ends, rel=1e-9)


def test_tp8_spreads_llama_weights_over_eight_gpus():
    """With TP8 every GPU holds an eighth of the weights."""
    s = shape("llama-3-70b")
    per_gpu = memory.weight_bytes_per_gpu(s, Layout(tp=8), "bf16")
    assert per_gpu == pytest.approx(memory.model_weight_bytes(s, "bf16") / 8, rel=1e-9)


def test_tp8_holds_an_eighth_of_llama3_70b_kv_cache():
    """Llama-3-70B's 8 KV heads split over TP8: one head, 1/8 of 327,680 bytes per token,
    on each GPU."""
    s = shape("llama-3-70b")
    assert memory.kv_bytes_per_token_per_gpu(s, Layout(tp=8), "bf16") == 327_680 / 8


def test_kv_heads_are_replicated_beyond_tp_eight():
    """TP16 over 8 KV heads replicates each head on two GPUs: per GPU it is TP8's share."""
    s = shape("llama-3-70b")
    tp8, tp16 = (memory.kv_bytes_per_token_per_gpu(s, Layout(tp=t), "bf16") for t in (8, 16))
    assert tp16 == tp8


def test_pipeline_stages_split_the_kv_cache_by_layers():
    """PP2 keeps 40 of 80 layers on a GPU: half the cache per token."""
    s = shape("llama-3-70b")
    assert memory.kv_bytes_per_token_per_gpu(s, Layout(pp=2), "bf16") == 327_680 / 2


def test_mla_latent_is_replicated_on_every_tp_rank():
    """MLA caches one latent per token, not per head: TP8 does not divide it."""
    s = shape("deepseek-v3")
    one = s.kv_bytes_per_token(BF16)
    assert memory.kv_bytes_per_token_per_gpu(s, Layout(tp=8), "bf16") == one
    assert memory.kv_bytes_per_token_per_gpu(s, Layout(tp=1), "bf16") == one


def test_kv_tokens_are_what_the_budget_holds():
    """The KV cache's tokens are the budget (capacity less weights, activations and
    workspace) over the bytes per token, and a request of N tokens takes N of them."""
    mem = memory.serving_memory(shape("llama-3.1-70b"), Layout(tp=8), Device.of("H100"), "vllm")
    assert mem.capacity == pytest.approx(0.9 * 80e9)
    assert mem.kv_budget == pytest.approx(
        mem.capacity - mem.weights - mem.activations - mem.workspace
    )
    assert mem.tokens == int(mem.kv_budget / (327_680 / 8))
    assert mem.requests(2048) == mem.tokens // 2048


def test_each_dp_group_holds_its_own_cache():
    """Two attention groups hold twice the tokens of one, and a request never spans two."""
    s, h100 = shape("llama-3.1-70b"), Device.of("H100")
    one = memory.serving_memory(s, Layout(tp=4), h100, "vllm")
    two = memory.serving_memory(s, Layout(tp=4, dp=2), h100, "vllm")
    assert two.tokens == 2 * one.tokens
    assert two.requests(4096) == 2 * one.requests(4096)


# --------------------------------------------------------------------------- ZeRO (ours)
def test_zero_stages_shard_more_as_the_stage_rises():
    """Per GPU: stage 0 keeps all 20 bytes per parameter, each stage after keeps less."""
    params = 7_000_000_000
    got = [memory.zero_model_states(params, 8, 8, stage)[0] for stage in range(4)]
    assert got[0] == 20 * params
    assert got == sorted(got, reverse=True) and len(set(got)) == 4


def test_seventy_b_under_zero0_does_not_fit_eight_h100s():
    """ZeRO-0 keeps 20 bytes × 70 B = 1.4 TB of model states on every GPU, ZeRO-3 about an
    eighth of it on 8 GPUs."""
    s, h100 = shape("llama-3-70b"), Device.of("H100")
    zero0 = memory.training_memory(s, Layout(dp=8, zero=0), h100, 4096)
    zero3 = memory.training_memory(s, Layout(dp=8, zero=3), h100, 4096)
    assert not zero0.fits
    assert zero0.states == 20 * s.params
    assert zero3.states == pytest.approx(zero0.states / 8, rel=0.15)


def test_eight_b_fits_eight_h100s_only_when_sharded():
    """Llama-3-8B: 160 GB of model states unsharded do not fit 80 GB; ZeRO-3 over 8 GPUs
    (about 18 GB of states) does, with the activations of one 4k sequence."""
    s, h100 = shape("llama-3-8b"), Device.of("H100")
    assert not memory.training_memory(s, Layout(dp=8, zero=0), h100, 4096).fits
    assert memory.training_memory(s, Layout(dp=8, zero=3), h100, 4096).fits


def test_full_recompute_shrinks_activations():
    """Full recompute keeps only each layer's input (2·s·b·h), far less than 34·s·b·h/t."""
    s = shape("llama-3-8b")
    none = memory.activation_bytes_per_gpu(s, Layout(), 4096)
    full = memory.activation_bytes_per_gpu(s, Layout(recompute="full"), 4096)
    assert full < none / 5


# --------------------------------------------------------------------------- ZeRO vs DeepSpeed
PARAMS = [1_000_003, 7_000_000_000, 70_553_706_496]
CLUSTERS = [(1, 1), (1, 8), (2, 8), (4, 4)]  # (nodes, GPUs per node)


@pytest.fixture(scope="module")
def deepspeed_zero():
    """DeepSpeed's estimators (importing DeepSpeed takes seconds)."""
    pytest.importorskip("deepspeed")
    from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs
    from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs

    return estimate_zero2_model_states_mem_needs, estimate_zero3_model_states_mem_needs


@pytest.mark.slow
@pytest.mark.parametrize("params, cluster", list(itertools.product(PARAMS, CLUSTERS)))
@pytest.mark.parametrize("offload", [False, True])
def test_zero2_matches_deepspeed(deepspeed_zero, params, cluster, offload):
    """Stage 2, with and without optimizer offload: DeepSpeed's GPU bytes exactly and its
    CPU bytes to the byte."""
    zero2, _ = deepspeed_zero
    nodes, per_node = cluster
    cpu_ds, gpu_ds = zero2(params, per_node, nodes, cpu_offload=offload)
    gpu, cpu = memory.zero_model_states(
        params, nodes * per_node, per_node, 2, "optimizer" if offload else "none"
    )
    assert gpu == gpu_ds
    assert cpu == pytest.approx(cpu_ds, abs=1)


@pytest.mark.slow
@pytest.mark.parametrize("params, cluster", list(itertools.product(PARAMS, CLUSTERS)))
@pytest.mark.parametrize(
    "offload, ds_offload, ds_offload_params",
    [
        ("none", False, False),
        ("optimizer", True, False),
        ("parameters", True, True),
        ("both", True, True),
    ],
)
@pytest.mark.parametrize("zero_init", [True, False])
def test_zero3_matches_deepspeed(
    deepspeed_zero, params, cluster, offload, ds_offload, ds_offload_params, zero_init
):
    """Stage 3, every offload and zero_init setting: DeepSpeed's GPU and CPU bytes."""
    _, zero3 = deepspeed_zero
    nodes, per_node = cluster
    largest = params // 50
    cpu_ds, gpu_ds, _ = zero3(
        params,
        largest,
        per_node,
        nodes,
        cpu_offload=ds_offload,
        cpu_offload_params=ds_offload_params,
        zero_init=zero_init,
    )
    gpu, cpu = memory.zero_model_states(
        params,
        nodes * per_node,
        per_node,
        3,
        offload,
        largest_layer=largest,
        zero_init=zero_init,
    )
    assert gpu == gpu_ds
    assert cpu == pytest.approx(cpu_ds, abs=1)


# --------------------------------------------------------------------------- validate's rule
FACTS_405B = {
    "layers": 126,
    "hidden": 16384,
    "heads": 128,
    "kv_heads": 8,
    "intermediate": 53248,
    "vocab": 128256,
}


def variant(tmp_path, name: str, **sections) -> Path:
    """A variant of the 70B vLLM example POC serving Llama-3.1-405B on H100s: an
    ``include:`` of it plus the keys that differ."""
    base = REPO / "pocs" / "llama-3.1-70b-bf16-mi300x-vllm" / "poc.yaml"
    model = {"id": "meta-llama/Llama-3.1-405B-Instruct", "facts": FACTS_405B}
    model |= sections.pop("model", {})
    data = {"include": str(base), "poc": {"name": name}, "model": model, **sections}
    path = tmp_path / name / "poc.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_405b_bf16_on_one_h100_fails_validation(tmp_path):
    """The memory rule refuses 810 GB of weights on one 80 GB GPU, with the numbers."""
    path = variant(
        tmp_path,
        "llama-405b-tp1",
        cluster={"gpu": "H100", "gpus_per_node": 1},
        serving={"parallelism": {"tp": 1}},
    )
    with pytest.raises(SpecError) as info:
        load_spec(path)
    (problem,) = [str(p) for p in info.value.problems]
    assert "on 1 H100 per replica (tp 1, pp 1) does not fit" in problem
    assert "811.7 GB of weights" in problem and "of 72.0 GB for the KV cache" in problem


def test_405b_bf16_on_eight_h100s_fails_validation_too(tmp_path):
    """TP8 leaves 101.5 GB of bf16 weights per 80 GB GPU: still refused (810 GB > 640 GB)."""
    path = variant(
        tmp_path,
        "llama-405b-tp8",
        cluster={"gpu": "H100", "gpus_per_node": 8},
        serving={"parallelism": {"tp": 8}},
    )
    with pytest.raises(SpecError, match=r"does not fit: 101\.5 GB of weights"):
        load_spec(path)


def test_405b_fits_two_h100_nodes_with_pp2(tmp_path):
    """TP8 × PP2 over 16 H100s holds the bf16 weights: the spec loads, the rule is silent."""
    path = variant(
        tmp_path,
        "llama-405b-tp8-pp2",
        cluster={
            "gpu": "H100",
            "nodes": 2,
            "gpus_per_node": 8,
            "interconnect": {"scale_up": "nvlink", "scale_out": "ib-ndr-400g"},
            "hosts": [
                {"name": "h100-01", "address": "h100-01.example.com"},
                {"name": "h100-02", "address": "h100-02.example.com"},
            ],
        },
        serving={"parallelism": {"tp": 8, "pp": 2}},
    )
    assert list(serving_fits_memory(load_spec(path))) == []


def test_405b_fp8_fits_eight_h100s(tmp_path):
    """FP8 halves the weights to about 51 GB per GPU on TP8: the spec loads."""
    path = variant(
        tmp_path,
        "llama-405b-fp8-tp8",
        model={"quantization": "fp8"},
        cluster={"gpu": "H100", "gpus_per_node": 8},
        serving={"parallelism": {"tp": 8}},
    )
    assert list(serving_fits_memory(load_spec(path))) == []
