"""Build a tiny, randomly initialised model folder that vLLM (CPU or GPU) can serve.

Used by the integration tests and the demo as a *real* server under the benchmarks: the
weights are random, so the text is noise, but every code path of the server (tokenizer,
chat template, prefill, decode, KV cache, MoE routing) runs for real.

The folder is deterministic from the seed: the same seed gives byte-identical
``model.safetensors``, ``tokenizer.json`` and config files. No hub access: the tokenizer is
a byte-level BPE trained here with ``tokenizers`` on :mod:`pocforge.tiny_model.corpus`, and the
weights are drawn with numpy's PCG64 and saved with ``safetensors.numpy``, so neither torch
nor transformers is needed to build it.

Checkpoint layouts follow the Hugging Face checkpoints of the same architectures
(``LlamaForCausalLM``; ``Qwen3MoeForCausalLM`` with per-expert weights), which is what
vLLM's loaders read.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

Arch = Literal["llama", "qwen-moe"]
ARCHS: tuple[str, ...] = ("llama", "qwen-moe")

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
# ChatML, so /v1/chat/completions works with plain string or list-of-parts content.
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}{{ part['text'] }}{% endfor %}{% endif %}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@dataclass(frozen=True)
class TinySpec:
    """Shape of the tiny model. head_dim 64 is one the vLLM CPU attention backend supports."""

    arch: Arch = "llama"
    seed: int = 0
    layers: int = 2
    hidden: int = 128
    heads: int = 2
    kv_heads: int = 2
    head_dim: int = 64
    intermediate: int = 256
    experts: int = 4
    experts_per_token: int = 2
    moe_intermediate: int = 64
    vocab_target: int = 2048
    max_positions: int = 4096


class TinyModelError(ValueError):
    """A bad argument to the tiny model builder."""


def build_tokenizer(vocab_target: int):
    """Train a byte-level BPE on the built-in corpus; deterministic (single-threaded)."""
    os.environ.setdefault("RAYON_NUM_THREADS", "1")  # merge ties broken the same way every run
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    from pocforge.tiny_model.corpus import corpus

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_target,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(), trainer)
    return tok


def _config(spec: TinySpec, vocab: int, eos_id: int) -> dict:
    common = {
        "vocab_size": vocab,
        "hidden_size": spec.hidden,
        "num_hidden_layers": spec.layers,
        "num_attention_heads": spec.heads,
        "num_key_value_heads": spec.kv_heads,
        "head_dim": spec.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": spec.max_positions,
        "initializer_range": 0.02,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": None,
        "eos_token_id": eos_id,
        "pad_token_id": None,
        "use_cache": True,
        "torch_dtype": "float32",
    }
    if spec.arch == "llama":
        return {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            **common,
            "intermediate_size": spec.intermediate,
            "mlp_bias": False,
        }
    return {
        "architectures": ["Qwen3MoeForCausalLM"],
        "model_type": "qwen3_moe",
        **common,
        "intermediate_size": spec.intermediate,
        "moe_intermediate_size": spec.moe_intermediate,
        "num_experts": spec.experts,
        "num_experts_per_tok": spec.experts_per_token,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "norm_topk_prob": True,
        "output_router_logits": False,
        "router_aux_loss_coef": 0.001,
        "use_sliding_window": False,
        "sliding_window": None,
    }


def _shapes(spec: TinySpec, vocab: int) -> dict[str, tuple[int, ...]]:
    """Tensor name -> shape, in the Hugging Face checkpoint layout of the architecture."""
    h, q, kv = spec.hidden, spec.heads * spec.head_dim, spec.kv_heads * spec.head_dim
    shapes: dict[str, tuple[int, ...]] = {
        "model.embed_tokens.weight": (vocab, h),
        "model.norm.weight": (h,),
        "lm_head.weight": (vocab, h),
    }
    for i in range(spec.layers):
        p = f"model.layers.{i}"
        shapes.update(
            {
                f"{p}.input_layernorm.weight": (h,),
                f"{p}.post_attention_layernorm.weight": (h,),
                f"{p}.self_attn.q_proj.weight": (q, h),
                f"{p}.self_attn.k_proj.weight": (kv, h),
                f"{p}.self_attn.v_proj.weight": (kv, h),
                f"{p}.self_attn.o_proj.weight": (h, q),
            }
        )
        if spec.arch == "llama":
            shapes.update(
                {
                    f"{p}.mlp.gate_proj.weight": (spec.intermediate, h),
                    f"{p}.mlp.up_proj.weight": (spec.intermediate, h),
                    f"{p}.mlp.down_proj.weight": (h, spec.intermediate),
                }
            )
        else:
            shapes[f"{p}.self_attn.q_norm.weight"] = (spec.head_dim,)
            shapes[f"{p}.self_attn.k_norm.weight"] = (spec.head_dim,)
            shapes[f"{p}.mlp.gate.weight"] = (spec.experts, h)
            m = spec.moe_intermediate
            for e in range(spec.experts):
                shapes[f"{p}.mlp.experts.{e}.gate_proj.weight"] = (m, h)
                shapes[f"{p}.mlp.experts.{e}.up_proj.weight"] = (m, h)
                shapes[f"{p}.mlp.experts.{e}.down_proj.weight"] = (h, m)
    return shapes


def _weights(spec: TinySpec, vocab: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(spec.seed)
    out: dict[str, np.ndarray] = {}
    for name in sorted(_shapes(spec, vocab)):  # fixed draw order, independent of dict order
        shape = _shapes(spec, vocab)[name]
        if name.endswith("norm.weight"):
            out[name] = np.ones(shape, dtype=np.float32)
        else:
            out[name] = (rng.standard_normal(shape) * 0.02).astype(np.float32)
    return out


def planned_config(arch: str = "llama") -> dict:
    """The ``config.json`` :func:`make_tiny` writes for ``arch``, before it is built (the
    planner sizes the model from it), with the vocabulary at its target size: the trained
    tokenizer's exact size is known only once built (within 64 of it)."""
    if arch not in ARCHS:
        raise TinyModelError(f"unknown arch {arch!r}; choose one of {', '.join(ARCHS)}")
    spec = TinySpec(arch=arch)  # type: ignore[arg-type]
    return _config(spec, spec.vocab_target, 0)


def make_tiny(out_dir: str | Path, arch: str = "llama", seed: int = 0, **overrides) -> Path:
    """Write a tiny ``arch`` model folder to ``out_dir`` and return its path.

    Files: config.json, generation_config.json, model.safetensors, tokenizer.json,
    tokenizer_config.json, special_tokens_map.json.
    """
    if arch not in ARCHS:
        raise TinyModelError(f"unknown arch {arch!r}; choose one of {', '.join(ARCHS)}")
    spec = TinySpec(arch=arch, seed=seed, **overrides)  # type: ignore[arg-type]
    if spec.hidden != spec.heads * spec.head_dim:
        raise TinyModelError("hidden must equal heads * head_dim")
    from safetensors.numpy import save_file

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer(spec.vocab_target)
    vocab = -(-tok.get_vocab_size() // 64) * 64  # pad rows to a multiple of 64
    eos_id = tok.token_to_id("<|endoftext|>")
    im_end = tok.token_to_id("<|im_end|>")

    tok.save(str(out / "tokenizer.json"))
    _dump(out / "config.json", _config(spec, vocab, eos_id))
    _dump(out / "generation_config.json", {"eos_token_id": [eos_id, im_end], "do_sample": False})
    _dump(
        out / "tokenizer_config.json",
        {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": None,
            "eos_token": "<|endoftext|>",
            "pad_token": "<|endoftext|>",
            "add_bos_token": False,
            "clean_up_tokenization_spaces": False,
            "model_max_length": spec.max_positions,
            "chat_template": CHAT_TEMPLATE,
        },
    )
    _dump(
        out / "special_tokens_map.json",
        {"eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>"},
    )
    save_file(_weights(spec, vocab), str(out / "model.safetensors"), metadata={"format": "pt"})
    return out


def _dump(path: Path, obj: dict) -> None:
    path.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n")
