"""The tiny model folder: deterministic bytes, a working tokenizer and chat template, and a
checkpoint layout transformers loads with no missing or unexpected weights."""

import json

import pytest

from pocforge.tiny_model.make import TinyModelError, make_tiny

FILES = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)


@pytest.mark.parametrize("arch", ["llama", "qwen-moe"])
def test_same_seed_gives_identical_bytes(tmp_path, arch):
    a, b = make_tiny(tmp_path / "a", arch, seed=5), make_tiny(tmp_path / "b", arch, seed=5)
    c = make_tiny(tmp_path / "c", arch, seed=6)
    for f in FILES:
        assert (a / f).read_bytes() == (b / f).read_bytes(), f
    assert (a / "model.safetensors").read_bytes() != (c / "model.safetensors").read_bytes()


def test_tokenizer_round_trips_and_chat_template_renders(tmp_path):
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    d = make_tiny(tmp_path, "llama")
    tok = Tokenizer.from_file(str(d / "tokenizer.json"))
    text = "Slow but steady wins the race. 1234 {'key': None}"
    assert tok.decode(tok.encode(text).ids) == text
    hf = AutoTokenizer.from_pretrained(str(d), local_files_only=True)
    chat = hf.apply_chat_template(
        [{"role": "user", "content": "hello"}], tokenize=False, add_generation_prompt=True
    )
    assert chat == "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n"
    cfg = json.loads((d / "config.json").read_text())
    assert cfg["vocab_size"] >= tok.get_vocab_size() and cfg["vocab_size"] % 64 == 0


@pytest.mark.slow
@pytest.mark.parametrize(
    "arch, cls", [("llama", "LlamaForCausalLM"), ("qwen-moe", "Qwen3MoeForCausalLM")]
)
def test_transformers_loads_every_weight(tmp_path, arch, cls):
    import torch
    from transformers import AutoModelForCausalLM

    d = make_tiny(tmp_path, arch)
    m, info = AutoModelForCausalLM.from_pretrained(str(d), output_loading_info=True)
    assert type(m).__name__ == cls
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    with torch.no_grad():
        logits = m(torch.tensor([[1, 2, 3]])).logits
    assert logits.shape[-1] == json.loads((d / "config.json").read_text())["vocab_size"]
    assert torch.isfinite(logits).all()


def test_bad_arch():
    with pytest.raises(TinyModelError, match="unknown arch"):
        make_tiny("/nonexistent", "gpt2")
