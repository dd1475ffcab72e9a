"""Model shapes from the catalog against numbers computed by hand from the published
config.json files (Llama-3-70B, DeepSeek-V3, gpt-oss-120b)."""

from __future__ import annotations

import pytest

from pocforge.catalog import catalog_entry, catalog_names
from pocforge.plan import Shape, ShapeError

BF16 = 2


def shape(name: str) -> Shape:
    return Shape(catalog_entry(name))


def test_llama3_70b_kv_cache_per_token():
    """Llama-3-70B caches 80 layers × 2 (K, V) × 8 KV heads × 128 × 2 bytes = 327,680
    bytes per token in bf16."""
    assert shape("llama-3-70b").kv_bytes_per_token(BF16) == 80 * 2 * 8 * 128 * 2 == 327_680


def test_llama3_70b_parameter_count():
    """Llama-3-70B's parts add up to its published 70.6 B parameters (within 0.5%)."""
    assert shape("llama-3-70b").params == pytest.approx(70.6e9, rel=0.005)


def test_deepseek_v3_mla_cache_is_the_latent_plus_the_rotary_key():
    """DeepSeek-V3's MLA caches kv_lora_rank 512 + qk_rope_head_dim 64 values per layer,
    over all 61 layers: exactly 61 × 576 × 2 bytes per token in bf16."""
    s = shape("deepseek-v3")
    assert s.is_mla
    assert s.kv_bytes_per_token(BF16) == 61 * (512 + 64) * 2


def test_deepseek_v3_total_and_active_parameters():
    """DeepSeek-V3 has 671 B parameters (within 1%) of which 37 B are active per token
    (within 3%), as its model card states."""
    s = shape("deepseek-v3")
    assert s.params == pytest.approx(671e9, rel=0.01)
    assert s.active_params == pytest.approx(37e9, rel=0.03)


PUBLISHED = [n for n in catalog_names() if catalog_entry(n).params]


@pytest.mark.parametrize("name", PUBLISHED)
def test_parts_add_up_to_the_published_counts(name):
    """Every catalog model's parts add up to its publisher's total (within 3%, the
    rounding of "70B" or "1T"), and its active count too, in either of the publishers'
    conventions (with the embedding lookup, as Mixtral's; without, as gpt-oss's)."""
    s, facts = shape(name), catalog_entry(name)
    assert s.params == pytest.approx(facts.params, rel=0.03)
    if facts.active_params:
        errors = [
            abs(a / facts.active_params - 1)
            for a in (s.active_params, s.active_params - s.embedding_params)
        ]
        assert min(errors) < 0.03, errors


def test_a_dense_model_has_every_parameter_active():
    """Without routed experts the active count is the total."""
    s = shape("llama-3.1-70b")
    assert not s.is_moe and s.active_params == s.params


def test_gpt_oss_sliding_window_caps_a_long_requests_cache():
    """gpt-oss-120b's sliding-window layers keep at most their 128-token window, so a
    100k-token request caches less than 100k tokens in every layer would, and exactly
    100k tokens in the full layers plus 128 in the sliding ones."""
    s = shape("gpt-oss-120b")
    full, sliding = s.layers - s.facts.sliding_window_layers, s.facts.sliding_window_layers
    assert sliding > 0 and s.facts.sliding_window == 128
    tokens = 100_000
    every_layer_full = tokens * s.layers * s.kv_width * BF16
    got = s.request_kv_bytes(tokens, BF16)
    assert got < every_layer_full
    assert got == (tokens * full + 128 * sliding) * s.kv_width * BF16


def test_a_short_request_is_not_capped_by_the_window():
    """Below the window a sliding layer caches every token, like a full one."""
    s = shape("gpt-oss-120b")
    assert s.request_kv_bytes(100, BF16) == 100 * s.layers * s.kv_width * BF16


def test_missing_facts_are_named():
    """A shape without the sizes it needs says which are missing."""
    facts = catalog_entry("llama-3-8b").model_copy(update={"hidden": None, "vocab": None})
    with pytest.raises(ShapeError, match="hidden, vocab"):
        Shape(facts)
