"""The kit's Hugging Face → Megatron-Core importer: the weight mapping itself (the whole
conversion runs in ``test_megatron_continued``)."""

from __future__ import annotations

import pytest
import torch

from pocforge.training.megatron_import import megatron_state, merge_qkv


def test_grouped_query_attention_is_fused_group_by_group():
    """8 query heads, 2 key/value groups, head width 3: Megatron's rows are group 0's four
    query heads, its key, its value, then group 1's."""
    heads, groups, width, hidden = 8, 2, 3, 5
    q = torch.arange(heads * width * hidden, dtype=torch.float32).view(heads * width, hidden)
    k = -torch.arange(groups * width * hidden, dtype=torch.float32).view(groups * width, hidden) - 1
    v = k - 1000
    fused = merge_qkv(q, k, v, heads, groups)
    assert fused.shape == ((heads + 2 * groups) * width, hidden)
    per_group = (heads // groups + 2) * width
    for group in range(groups):
        rows = fused[group * per_group : (group + 1) * per_group]
        queries = q[group * 4 * width : (group + 1) * 4 * width]
        assert torch.equal(rows[: 4 * width], queries)
        assert torch.equal(rows[4 * width : 5 * width], k[group * width : (group + 1) * width])
        assert torch.equal(rows[5 * width :], v[group * width : (group + 1) * width])


def llama(layers: int = 1, tied: bool = False) -> tuple[dict, dict]:
    config = {"num_attention_heads": 2, "num_key_value_heads": 2, "num_hidden_layers": layers,
              "tie_word_embeddings": tied}  # fmt: skip
    tensors = {"model.embed_tokens.weight": torch.zeros(10, 4), "model.norm.weight": torch.ones(4)}
    for n in range(layers):
        pre = f"model.layers.{n}."
        for name in ("q", "k", "v", "o"):
            tensors[f"{pre}self_attn.{name}_proj.weight"] = torch.zeros(4, 4)
        for name in ("gate", "up"):
            tensors[f"{pre}mlp.{name}_proj.weight"] = torch.zeros(6, 4)
        tensors[f"{pre}mlp.down_proj.weight"] = torch.zeros(4, 6)
        tensors[f"{pre}input_layernorm.weight"] = torch.ones(4)
        tensors[f"{pre}post_attention_layernorm.weight"] = torch.ones(4)
    if not tied:
        tensors["lm_head.weight"] = torch.zeros(10, 4)
    return tensors, config


def test_every_llama_tensor_has_its_megatron_place():
    state = megatron_state(*llama())
    assert state["decoder.layers.0.mlp.linear_fc1.weight"].shape == (12, 4)  # gate, then up
    assert state["decoder.layers.0.self_attention.linear_qkv.weight"].shape == (12, 4)
    assert "output_layer.weight" in state
    assert "output_layer.weight" not in megatron_state(*llama(tied=True))


def test_a_tensor_with_no_place_is_refused_by_name():
    tensors, config = llama()
    tensors["model.layers.0.self_attn.q_proj.bias"] = torch.zeros(4)
    with pytest.raises(SystemExit, match="q_proj.bias"):
        megatron_state(tensors, config)
