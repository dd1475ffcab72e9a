"""The layout search: only valid layouts that fit are ranked, by throughput per GPU, and
every rejected one says why."""

from __future__ import annotations

from functools import cache

import pytest

from pocforge.catalog import catalog_entry
from pocforge.plan import (
    Device,
    ServingPoint,
    Shape,
    Slos,
    TrainingPoint,
    search_serving,
    search_training,
)

H100 = Device.of("H100")


@cache
def shape(name: str) -> Shape:
    return Shape(catalog_entry(name))


@cache
def serving(model: str, gpus: int, framework: str = "vllm", precision: str = "bf16"):
    kv = "fp8" if precision == "fp8" else "bf16"
    return search_serving(
        shape(model), H100, gpus, ServingPoint(1024, 1024, 256), framework, precision, kv
    )


SEARCHES = [
    ("llama-3.1-70b", 8, "vllm", "bf16"),
    ("llama-3.1-70b", 16, "sglang", "bf16"),
    ("deepseek-v3", 16, "vllm", "fp8"),
    ("deepseek-v3", 16, "sglang", "fp8"),
    ("qwen3-30b-a3b", 8, "vllm", "bf16"),
]


@pytest.mark.parametrize("model, gpus, framework, precision", SEARCHES)
def test_ranked_layouts_divide_the_cluster_and_fit(model, gpus, framework, precision):
    """Each ranked layout's replica divides the GPUs, its replicas fill them, and it fits."""
    found = serving(model, gpus, framework, precision)
    assert found.ranked
    for c in found.ranked:
        assert gpus % c.layout.gpus == 0
        assert c.replicas * c.layout.gpus == gpus
        assert c.prediction.fits, c.layout.label()
        assert shape(model).heads % c.layout.tp == 0


@pytest.mark.parametrize("model, gpus, framework, precision", SEARCHES)
def test_ranking_is_by_score_descending(model, gpus, framework, precision):
    """Best first; the score is the prediction's output tokens/s per GPU."""
    ranked = serving(model, gpus, framework, precision).ranked
    scores = [c.score for c in ranked]
    assert scores == sorted(scores, reverse=True)
    for c in ranked:
        assert c.score == c.prediction.output_tput_per_gpu


@pytest.mark.parametrize("model, gpus, framework, precision", SEARCHES)
def test_rejected_layouts_carry_a_reason(model, gpus, framework, precision):
    """A rejected layout names why (memory in GB, or the SLO it misses)."""
    for c in serving(model, gpus, framework, precision).rejected:
        assert c.rejected and ("GB" in c.rejected or "SLO" in c.rejected), c.as_dict()


@pytest.mark.parametrize("framework", ["vllm", "trtllm"])
def test_dp_attention_only_for_sglang(framework):
    """DP-attention is SGLang's: other engines' searches never offer it, SGLang's does for
    an MLA MoE model."""
    other = search_serving(
        shape("deepseek-v3"), H100, 16, ServingPoint(1024, 1024, 256), framework, "fp8", "fp8"
    )
    assert not any(c.layout.dp_attention for c in other.ranked + other.rejected)
    assert any(c.layout.dp_attention for c in serving("deepseek-v3", 16, "sglang", "fp8").ranked)


def test_dense_models_get_no_dp_attention_on_sglang():
    """DP-attention pays off only with MoE or MLA; a dense GQA model is not offered it."""
    found = serving("llama-3.1-70b", 16, "sglang", "bf16")
    assert not any(c.layout.dp_attention for c in found.ranked + found.rejected)


@pytest.mark.parametrize("model, precision", [("deepseek-v3", "fp8"), ("qwen3-30b-a3b", "bf16")])
def test_vllm_expert_parallel_spans_tp_times_dp(model, precision):
    """vLLM's --enable-expert-parallel puts the experts over all TP × DP GPUs."""
    found = serving(model, 16 if model == "deepseek-v3" else 8, "vllm", precision)
    with_ep = [c for c in found.ranked + found.rejected if c.layout.ep > 1]
    assert with_ep
    for c in with_ep:
        assert c.layout.ep == c.layout.tp * c.layout.dp, c.layout.label()


def test_dense_models_get_no_expert_parallel():
    """EP needs routed experts."""
    found = serving("llama-3.1-70b", 8)
    assert all(c.layout.ep == 1 for c in found.ranked + found.rejected)


def test_405b_bf16_fits_no_layout_of_eight_h100s():
    """810 GB of bf16 weights exceed 8 × 80 GB: no layout is ranked, TP1 included, and TP1
    is rejected for memory."""
    found = search_serving(shape("llama-3.1-405b"), H100, 8, ServingPoint(1024, 1024, 64))
    assert not any(c.layout.tp == 1 for c in found.ranked)
    assert found.ranked == [] and found.best is None
    (tp1,) = [c for c in found.rejected if c.layout.label() == "TP1"]
    assert "811.7 GB" in tp1.rejected


def test_an_impossible_slo_rejects_every_layout_naming_it():
    """A TPOT bound no layout meets leaves nothing ranked, and the fitting layouts say it
    was the SLO."""
    found = search_serving(
        shape("llama-3.1-70b"), H100, 8, ServingPoint(1024, 1024, 64), slos=Slos(tpot_ms=0.5)
    )
    assert found.ranked == []
    slo = [c for c in found.rejected if "SLO" in c.rejected]
    assert slo and all("TPOT" in c.rejected for c in slo)


def test_the_slo_picks_a_lower_concurrency():
    """A tight TPOT bound makes the best layout run fewer clients than no bound does."""
    point = ServingPoint(1024, 1024, 1024)
    free = search_serving(shape("llama-3.1-70b"), H100, 8, point).best
    tight = search_serving(shape("llama-3.1-70b"), H100, 8, point, slos=Slos(tpot_ms=20)).best
    assert tight.concurrency < free.concurrency
    assert tight.prediction.tpot_ms <= 20


@pytest.mark.parametrize("framework", ["megatron", "deepspeed"])
def test_training_layouts_use_every_gpu(framework):
    """On 16 GPUs every training layout tried has tp × pp × cp × dp = 16, and some fit."""
    found = search_training(shape("llama-3.1-8b"), H100, 16, TrainingPoint(4096, 64), framework)
    assert found.ranked
    for c in found.ranked + found.rejected:
        layout = c.layout
        assert layout.tp * layout.pp * layout.cp * layout.dp == 16, layout.label()
    for c in found.ranked:
        assert c.prediction.fits
    scores = [c.score for c in found.ranked]
    assert scores == sorted(scores, reverse=True)
    if framework == "deepspeed":
        assert all(c.layout.tp == c.layout.pp == c.layout.cp == 1 for c in found.ranked)


def test_training_search_rejects_what_cannot_fit():
    """Llama-3-70B needs 1.4 TB of model states: 16 H100s (1.28 TB) fit no layout, and each
    rejection says what exceeds the GPU."""
    found = search_training(shape("llama-3-70b"), H100, 16, TrainingPoint(4096, 64))
    assert found.ranked == []
    assert found.rejected and all("exceed 80 GB" in c.rejected for c in found.rejected)


@pytest.mark.parametrize("model, gpus, framework, precision", SEARCHES)
def test_the_planner_offers_only_layouts_the_framework_runs(model, gpus, framework, precision):
    """Every layout the search considers passes the framework's layout rules, the ones
    ``validate`` holds a spec to (SGLang: ep inside tp, DP attention with dp > 1)."""
    from pocforge.plan.layout import layout_problems

    found = serving(model, gpus, framework, precision)
    experts = shape(model).experts if shape(model).is_moe else None
    for c in found.ranked + found.rejected:
        assert layout_problems(framework, c.layout, experts) == [], c.layout.label()
    if framework == "sglang" and shape(model).is_moe:
        assert not any(c.layout.ep > c.layout.tp for c in found.ranked + found.rejected)
