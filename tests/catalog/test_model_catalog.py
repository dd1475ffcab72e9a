"""The shipped model catalog (``models.yaml``) and the config.json reader behind it.

The config dicts below are excerpts of real Hugging Face ``config.json`` files, keys and
values unchanged (sources in ``tests/data/README.md``, "config.json excerpts"); the
hand-checked numbers are the ones the planner's formulas hinge on.
"""

from __future__ import annotations

import json
import re

import pytest
from pydantic import ValidationError

from pocforge.catalog import ModelFacts, catalog_entry, catalog_names, model_facts
from pocforge.catalog.model_facts import _catalog, facts_from_config
from pocforge.frameworks.startup import estimate_parameters
from pocforge.spec import load_poc
from pocforge.spec.planning import facts_of

REQUIRED = {
    "llama-2-70b",
    "llama-3-8b",
    "llama-3-70b",
    "llama-3.1-8b",
    "llama-3.1-70b",
    "llama-3.1-405b",
    "llama-3.3-70b",
    "qwen3-8b",
    "qwen3-32b",
    "qwen3-30b-a3b",
    "qwen3-235b-a22b",
    "mixtral-8x7b",
    "mixtral-8x22b",
    "deepseek-v3",
    "deepseek-r1",
    "gpt-oss-20b",
    "gpt-oss-120b",
    "kimi-k2",
}
DENSE_LLAMAS = sorted(n for n in REQUIRED if n.startswith("llama"))

# deepseek-ai/DeepSeek-V3 config.json, every key the reader knows plus its neighbours
DEEPSEEK_V3 = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "first_k_dense_replace": 3,
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "kv_lora_rank": 512,
    "max_position_embeddings": 163840,
    "model_type": "deepseek_v3",
    "moe_intermediate_size": 2048,
    "moe_layer_freq": 1,
    "n_group": 8,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "num_attention_heads": 128,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 61,
    "num_key_value_heads": 128,
    "num_nextn_predict_layers": 1,
    "q_lora_rank": 1536,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "tie_word_embeddings": False,
    "v_head_dim": 128,
    "vocab_size": 129280,
}
# openai/gpt-oss-20b config.json
GPT_OSS_20B = {
    "architectures": ["GptOssForCausalLM"],
    "experts_per_token": 4,
    "head_dim": 64,
    "hidden_size": 2880,
    "initial_context_length": 4096,
    "intermediate_size": 2880,
    "layer_types": ["sliding_attention", "full_attention"] * 12,
    "max_position_embeddings": 131072,
    "model_type": "gpt_oss",
    "num_attention_heads": 64,
    "num_experts_per_tok": 4,
    "num_hidden_layers": 24,
    "num_key_value_heads": 8,
    "num_local_experts": 32,
    "sliding_window": 128,
    "tie_word_embeddings": False,
    "vocab_size": 201088,
}
# meta-llama/Meta-Llama-3.1-70B config.json: no head_dim key
LLAMA_3_1_70B = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 8192,
    "intermediate_size": 28672,
    "max_position_embeddings": 131072,
    "model_type": "llama",
    "num_attention_heads": 64,
    "num_hidden_layers": 80,
    "num_key_value_heads": 8,
    "tie_word_embeddings": False,
    "vocab_size": 128256,
}
# meta-llama/Llama-3.3-70B-Instruct config.json: RoPE base 500000, Llama 3 frequency scaling
LLAMA_3_3_70B = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 8192,
    "intermediate_size": 28672,
    "max_position_embeddings": 131072,
    "model_type": "llama",
    "num_attention_heads": 64,
    "num_hidden_layers": 80,
    "num_key_value_heads": 8,
    "rope_scaling": {
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "vocab_size": 128256,
}
# Qwen/Qwen1.5-MoE-A2.7B config.json: one shared expert of its own width, and a window
# that use_sliding_window switches off
QWEN1_5_MOE_A2_7B = {
    "architectures": ["Qwen2MoeForCausalLM"],
    "decoder_sparse_step": 1,
    "hidden_size": 2048,
    "intermediate_size": 5632,
    "max_window_layers": 21,
    "model_type": "qwen2_moe",
    "moe_intermediate_size": 1408,
    "num_attention_heads": 16,
    "num_experts": 60,
    "num_experts_per_tok": 4,
    "num_hidden_layers": 24,
    "num_key_value_heads": 16,
    "shared_expert_intermediate_size": 5632,
    "sliding_window": 32768,
    "tie_word_embeddings": False,
    "use_sliding_window": False,
    "vocab_size": 151936,
}
# zai-org/GLM-5 config.json: an MLA model whose head_dim is the rotary part
GLM_5 = {
    "head_dim": 64,
    "hidden_size": 6144,
    "kv_lora_rank": 512,
    "num_attention_heads": 64,
    "num_hidden_layers": 78,
    "qk_nope_head_dim": 192,
    "qk_rope_head_dim": 64,
    "v_head_dim": 256,
}


def test_llama_3_70b_matches_its_config():
    """Hand-checked against the Meta-Llama-3-70B config.json (head_dim is hidden/heads)."""
    f = catalog_entry("llama-3-70b")
    assert (f.layers, f.hidden, f.heads, f.kv_heads, f.head_dim) == (80, 8192, 64, 8, 128)
    assert (f.intermediate, f.vocab, f.max_position) == (28672, 128256, 8192)
    assert f.is_moe is False and not f.is_mla and f.tie_embeddings is False


def test_deepseek_v3_matches_its_config():
    """MLA (512 latent, 64 rotary), 256 routed experts of which 8 per token, 1 shared,
    and 3 dense layers before the MoE ones."""
    f = catalog_entry("deepseek-v3")
    assert (f.layers, f.kv_lora_rank, f.qk_rope_head_dim) == (61, 512, 64)
    assert (f.experts, f.top_k, f.shared_experts, f.dense_layers) == (256, 8, 1, 3)
    assert (f.q_lora_rank, f.qk_nope_head_dim, f.v_head_dim) == (1536, 128, 128)
    assert f.is_moe and f.is_mla


def test_the_catalog_has_exactly_the_required_models():
    names = catalog_names()
    assert set(names) == REQUIRED and len(names) == len(REQUIRED)
    assert all(re.fullmatch(r"[a-z0-9]+(?:[.-][a-z0-9]+)*", n) for n in names), names


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_every_entry_is_complete_and_consistent(name):
    """Each entry loads (strict schema), names its source, and has what sizing needs."""
    entry = _catalog()[name]
    f = entry.facts
    assert entry.source.startswith("https://") and "/" in entry.hf_id
    assert None not in (f.layers, f.hidden, f.heads, f.kv_heads, f.vocab, f.intermediate)
    assert None not in (f.max_position, f.params, f.tie_embeddings)
    assert f.heads % f.kv_heads == 0
    if f.is_moe:
        assert f.top_k and f.active_params and f.active_params < f.params
        assert f.dense_layers is not None and f.shared_experts is not None
    else:
        assert f.experts == 0 and f.active_params is None
    if f.is_mla:
        assert f.qk_rope_head_dim and f.qk_nope_head_dim and f.v_head_dim
    else:
        assert f.head_dim is not None
    assert (f.sliding_window is None) == (f.sliding_window_layers is None)


def test_ids_and_aliases_name_one_entry_each():
    seen: dict[str, str] = {}
    for name, entry in _catalog().items():
        for key in (name, entry.hf_id, *entry.aliases):
            assert seen.setdefault(key.lower(), name) == name, (
                f"{key} is in {seen[key.lower()]} and {name}"
            )


@pytest.mark.parametrize(
    ("query", "name"),
    [
        ("meta-llama/Llama-3.1-70B", "llama-3.1-70b"),
        ("META-LLAMA/llama-3.1-70b", "llama-3.1-70b"),
        ("meta-llama/Llama-3.1-70B-Instruct", "llama-3.1-70b"),
        ("meta-llama/Meta-Llama-3.1-70B-Instruct", "llama-3.1-70b"),
        ("meta-llama/Meta-Llama-3-8B-Instruct", "llama-3-8b"),
        ("Qwen/Qwen3-235B-A22B", "qwen3-235b-a22b"),
        ("deepseek-ai/DeepSeek-R1-0528", "deepseek-r1"),
        ("openai/gpt-oss-120b", "gpt-oss-120b"),
        ("Kimi-K2", "kimi-k2"),
        # checkpoint variants: quantized, republished by another owner (issue 42)
        ("Qwen/Qwen3-30B-A3B-FP8", "qwen3-30b-a3b"),
        ("RedHatAI/Llama-3.1-70B-Instruct-FP8-dynamic", "llama-3.1-70b"),
        ("neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8", "llama-3.1-70b"),
        ("hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4", "llama-3.1-70b"),
    ],
)
def test_lookup_by_catalog_name_or_hugging_face_id(query, name):
    assert catalog_entry(query) == catalog_entry(name)
    assert catalog_entry(query) == _catalog()[name].facts


def test_an_instruct_release_with_another_vocabulary_does_not_resolve():
    """Mixtral-8x22B-Instruct-v0.1 has 32768 tokens, the base 32000: no silent match."""
    with pytest.raises(KeyError):
        catalog_entry("mistralai/Mixtral-8x22B-Instruct-v0.1")


def test_an_unknown_model_names_the_known_ones():
    with pytest.raises(
        KeyError, match=r"unknown model 'org/nope' \(known: llama-2-70b, .*kimi-k2\)"
    ):
        catalog_entry("org/nope")


def test_entries_are_copies():
    catalog_entry("llama-3-8b").layers = 1
    assert catalog_entry("llama-3-8b").layers == 32


def test_facts_from_a_deepseek_config():
    f = facts_from_config(DEEPSEEK_V3)
    assert (f.shared_experts, f.dense_layers, f.qk_nope_head_dim, f.v_head_dim) == (1, 3, 128, 128)
    assert (f.experts, f.top_k, f.moe_intermediate, f.kv_lora_rank) == (256, 8, 2048, 512)
    assert f.tie_embeddings is False and f.head_dim is None and f.sliding_window is None


def test_facts_from_a_gpt_oss_config():
    """head_dim is read, not derived (2880 / 64 would be 45); half the layers slide."""
    f = facts_from_config(GPT_OSS_20B)
    assert (f.head_dim, f.experts, f.top_k) == (64, 32, 4)
    assert (f.sliding_window, f.sliding_window_layers) == (128, 12)
    assert f.moe_intermediate is None and f.intermediate == 2880  # one expert's width


def test_facts_from_a_llama_config_without_head_dim():
    f = facts_from_config(LLAMA_3_1_70B)
    assert f.head_dim is None and f.hidden // f.heads == 128
    assert f.tie_embeddings is False  # a bool is read, not skipped
    assert facts_from_config({**LLAMA_3_1_70B, "tie_word_embeddings": True}).tie_embeddings is True


def test_facts_from_a_qwen2_moe_config():
    """A shared expert of 5632 (four experts' width), and a window switched off."""
    f = facts_from_config(QWEN1_5_MOE_A2_7B)
    assert (f.shared_experts, f.shared_intermediate, f.moe_intermediate) == (1, 5632, 1408)
    assert f.dense_layers is None  # no mlp_only_layers key: not stated
    assert f.sliding_window is None and f.sliding_window_layers is None


def test_qwen_sliding_window_layers_follow_max_window_layers():
    config = {**QWEN1_5_MOE_A2_7B, "use_sliding_window": True, "mlp_only_layers": []}
    f = facts_from_config(config)
    assert (f.sliding_window, f.sliding_window_layers, f.dense_layers) == (32768, 3, 0)


def test_an_mla_configs_head_dim_is_not_taken_for_the_head_width():
    """GLM-5 states head_dim 64, its rotary part; the head is 192 + 64 wide."""
    f = facts_from_config(GLM_5)
    assert f.head_dim is None and (f.qk_rope_head_dim, f.qk_nope_head_dim) == (64, 192)


def test_a_zero_in_a_config_is_not_a_size():
    f = facts_from_config({**QWEN1_5_MOE_A2_7B, "shared_expert_intermediate_size": 0})
    assert f.shared_intermediate is None and f.shared_experts is None and f.experts == 60


@pytest.mark.parametrize(
    ("name", "config"),
    [("deepseek-v3", DEEPSEEK_V3), ("gpt-oss-20b", GPT_OSS_20B), ("llama-3.1-70b", LLAMA_3_1_70B),
     ("llama-3.3-70b", LLAMA_3_3_70B)],
)  # fmt: skip
def test_the_catalog_says_what_the_config_says(name, config):
    from_config = facts_from_config(config).model_dump(exclude_none=True)
    entry = catalog_entry(name).model_dump()
    assert {k: entry[k] for k in from_config} == from_config


def test_facts_check_their_parts_against_the_layers():
    with pytest.raises(ValidationError, match=r"dense_layers \(4\) exceeds layers \(3\)"):
        ModelFacts(layers=3, dense_layers=4)
    with pytest.raises(ValidationError, match=r"top_k \(9\) exceeds experts \(8\)"):
        ModelFacts(experts=8, top_k=9)


def test_model_facts_falls_back_to_the_catalog(tmp_path):
    assert model_facts("meta-llama/Llama-3.1-70B-Instruct", tmp_path) == catalog_entry(
        "llama-3.1-70b"
    )
    merged = model_facts("deepseek-ai/DeepSeek-V3", tmp_path, ModelFacts(max_position=32768))
    assert merged.max_position == 32768 and merged.dense_layers == 3  # overrides win
    assert model_facts("org/unknown", tmp_path) == ModelFacts()


def test_a_local_config_wins_over_the_catalog(tmp_path):
    """A folder named like a catalog id, with its own config.json, is read."""
    folder = tmp_path / "meta-llama" / "Llama-3.1-8B"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({**LLAMA_3_1_70B, "num_hidden_layers": 2}))
    facts = model_facts("meta-llama/Llama-3.1-8B", tmp_path)
    assert facts.layers == 2 and facts.hidden == 8192 and facts.params is None
    (folder / "config.json").write_text("{not json")
    assert model_facts("meta-llama/Llama-3.1-8B", tmp_path) == catalog_entry("llama-3.1-8b")


def test_a_poc_spec_gets_the_catalog_facts_it_does_not_state():
    facts = facts_of(load_poc("deepseek-v3-fp8-mi355x-sglang"))
    assert (facts.shared_experts, facts.dense_layers, facts.v_head_dim) == (1, 3, 128)


@pytest.mark.parametrize("name", DENSE_LLAMAS)
def test_the_parameter_estimate_matches_the_stated_count(name):
    """The kit's estimate (frameworks.startup) against Meta's stated size, within 10%:
    Llama's count is exact from the facts, Meta rounds it (70.55B is "70B")."""
    facts = catalog_entry(name)
    assert estimate_parameters(facts) == pytest.approx(facts.params, rel=0.10)


def test_rope_facts_from_a_llama_3_config():
    f = facts_from_config(LLAMA_3_3_70B)
    assert (f.rope_theta, f.rope_scaling, f.rope_scaling_factor) == (500000.0, "llama3", 8.0)
    assert facts_from_config(LLAMA_3_1_70B).rope_theta is None  # the excerpt omits it


def test_a_quantized_moe_checkpoint_is_known_as_moe_to_the_rules():
    """SGLang DP attention on Qwen3-30B-A3B-FP8: the rule that refuses DP attention for
    dense models must see the FP8 checkpoint as the MoE model it is."""
    from pocforge.spec.rules import check_rules

    spec = load_poc("deepseek-v3-fp8-mi355x-sglang")
    spec = spec.model_copy(
        update={
            "model": spec.model.model_copy(update={"id": "Qwen/Qwen3-30B-A3B-FP8", "facts": None})
        }
    )
    assert facts_of(spec).experts == 128
    assert not [text for _, text in check_rules(spec) if "only helps MoE" in text]
