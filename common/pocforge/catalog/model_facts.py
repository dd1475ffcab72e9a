"""Model facts: the architecture numbers the planner and the rules need.

They come from a Hugging Face ``config.json`` when the model folder is at hand, else from
the shipped catalog (``models.yaml``: published models, each value checked against its
config.json, the source recorded beside it) when ``model.id`` names one of its models, and
from the spec's ``model.facts`` on top (overrides win).
"""

from __future__ import annotations

import contextlib
import json
import re
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

# config.json key(s) -> our field; the first key present wins (Llama, Mixtral, Qwen-MoE,
# DeepSeek, gpt-oss). Fields read by a rule of their own are in facts_from_config.
_HF_KEYS: dict[str, tuple[str, ...]] = {
    "layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "hidden": ("hidden_size", "n_embd", "d_model"),
    "heads": ("num_attention_heads", "n_head"),
    "kv_heads": ("num_key_value_heads",),
    "head_dim": ("head_dim",),
    "intermediate": ("intermediate_size",),
    "vocab": ("vocab_size",),
    "experts": ("num_local_experts", "n_routed_experts", "num_experts"),
    "top_k": ("num_experts_per_tok", "experts_per_token"),
    "moe_intermediate": ("moe_intermediate_size",),
    "shared_experts": ("n_shared_experts",),
    "shared_intermediate": ("shared_expert_intermediate_size",),
    "dense_layers": ("first_k_dense_replace",),
    "kv_lora_rank": ("kv_lora_rank",),
    "q_lora_rank": ("q_lora_rank",),
    "qk_rope_head_dim": ("qk_rope_head_dim",),
    "qk_nope_head_dim": ("qk_nope_head_dim",),
    "v_head_dim": ("v_head_dim",),
    "sliding_window": ("sliding_window",),
    "max_position": ("max_position_embeddings",),
}
# Fields where 0 is a fact (a dense model, no shared expert, no dense layer); elsewhere a 0
# in a config means "not used" and is skipped.
_ZERO_IS_A_FACT = frozenset({"experts", "shared_experts", "dense_layers"})


class ModelFacts(BaseModel):
    """Architecture facts; ``None`` means not known."""

    model_config = ConfigDict(extra="forbid")

    layers: int | None = Field(None, ge=1, description="Transformer layers.")
    hidden: int | None = Field(None, ge=1, description="Hidden size.")
    heads: int | None = Field(None, ge=1, description="Attention (query) heads.")
    kv_heads: int | None = Field(
        None, ge=1, description="Key/value heads (GQA); equals heads for MHA."
    )
    head_dim: int | None = Field(
        None,
        ge=1,
        description="Width of one attention head; unset means hidden / heads "
        "(gpt-oss: 64 with hidden 2880 and 64 heads).",
    )
    intermediate: int | None = Field(None, ge=1, description="Dense MLP intermediate size.")
    vocab: int | None = Field(None, ge=1, description="Vocabulary size.")
    tie_embeddings: bool | None = Field(
        None, description="The LM head shares the embedding's matrix (`tie_word_embeddings`)."
    )
    experts: int | None = Field(
        None, ge=0, description="Routed experts per MoE layer; 0 or unset for a dense model."
    )
    top_k: int | None = Field(None, ge=1, description="Experts each token is routed to.")
    moe_intermediate: int | None = Field(
        None,
        ge=1,
        description="Intermediate size of one routed expert; unset means intermediate "
        "(Mixtral, gpt-oss).",
    )
    shared_experts: int | None = Field(
        None,
        ge=0,
        description="Shared experts every token passes through in an MoE layer "
        "(DeepSeek-V3, Kimi K2: 1).",
    )
    shared_intermediate: int | None = Field(
        None,
        ge=1,
        description="Intermediate size of the shared expert(s) together, when it is not "
        "shared_experts × moe_intermediate (Qwen2-MoE's `shared_expert_intermediate_size`).",
    )
    dense_layers: int | None = Field(
        None,
        ge=0,
        description="Leading layers with a dense MLP before the MoE layers "
        "(`first_k_dense_replace`; DeepSeek-V3: 3).",
    )
    kv_lora_rank: int | None = Field(
        None, ge=1, description="MLA latent (compressed KV) rank, e.g. 512."
    )
    q_lora_rank: int | None = Field(None, ge=1, description="MLA query low-rank size.")
    qk_rope_head_dim: int | None = Field(
        None, ge=1, description="MLA rotary part of each head, e.g. 64."
    )
    qk_nope_head_dim: int | None = Field(
        None, ge=1, description="MLA non-rotary part of each query/key head, e.g. 128."
    )
    v_head_dim: int | None = Field(None, ge=1, description="MLA value head width, e.g. 128.")
    sliding_window: int | None = Field(
        None, ge=1, description="Sliding-window attention span in tokens; unset: none."
    )
    sliding_window_layers: int | None = Field(
        None,
        ge=0,
        description="How many layers use the sliding window (gpt-oss: every other one); "
        "unset: every layer is taken as full attention (the larger KV cache).",
    )
    max_position: int | None = Field(None, ge=1, description="Longest context the model supports.")
    rope_theta: float | None = Field(
        None, gt=0, description="RoPE base frequency (`rope_theta`); 10000 when a config omits it."
    )
    rope_scaling: str | None = Field(
        None,
        description="RoPE scaling type (`rope_scaling.rope_type`: `llama3`, `yarn`…); unset: none.",
    )
    rope_scaling_factor: float | None = Field(
        None, gt=0, description="RoPE scaling factor (`rope_scaling.factor`, Llama 3.1: 8)."
    )
    norm_eps: float | None = Field(
        None,
        gt=0,
        description="Epsilon of the normalization layers (`rms_norm_eps`, Llama 3.1: 1e-5).",
    )
    params: int | None = Field(
        None,
        ge=1,
        description="Total parameters as the model's publisher states them (a check on "
        "the kit's own count, not an input to it).",
    )
    active_params: int | None = Field(
        None,
        ge=1,
        description="Parameters active per token as the publisher states them (MoE); "
        "unset for a dense model.",
    )

    @model_validator(mode="after")
    def _parts_fit(self) -> ModelFacts:
        for part in ("dense_layers", "sliding_window_layers"):
            value = getattr(self, part)
            if value is not None and self.layers is not None and value > self.layers:
                raise ValueError(f"{part} ({value}) exceeds layers ({self.layers})")
        if self.top_k and self.experts and self.top_k > self.experts:
            raise ValueError(f"top_k ({self.top_k}) exceeds experts ({self.experts})")
        return self

    @property
    def is_moe(self) -> bool | None:
        """True/False when known, None when the facts do not say."""
        return None if self.experts is None else self.experts > 1

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank is not None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def facts_from_config(config: dict) -> ModelFacts:
    """Facts from a parsed Hugging Face ``config.json``."""
    values: dict[str, Any] = {}
    for field, keys in _HF_KEYS.items():
        for key in keys:
            value = _int(config.get(key))
            if value is not None and value >= (0 if field in _ZERO_IS_A_FACT else 1):
                values[field] = value
                break
    if isinstance(config.get("tie_word_embeddings"), bool):
        values["tie_embeddings"] = config["tie_word_embeddings"]
    if isinstance(config.get("rope_theta"), int | float) and config["rope_theta"] > 0:
        values["rope_theta"] = float(config["rope_theta"])
    for key in ("rms_norm_eps", "layer_norm_epsilon", "layer_norm_eps", "norm_epsilon"):
        if isinstance(config.get(key), int | float) and config[key] > 0:
            values["norm_eps"] = float(config[key])
            break
    scaling = config.get("rope_scaling")
    if isinstance(scaling, dict) and (scaling.get("rope_type") or scaling.get("type")):
        values["rope_scaling"] = str(scaling.get("rope_type") or scaling.get("type"))
        if isinstance(scaling.get("factor"), int | float):
            values["rope_scaling_factor"] = float(scaling["factor"])
    if "kv_lora_rank" in values:
        # MLA configs that carry a head_dim mean the rotary part (qk_rope_head_dim says it)
        values.pop("head_dim", None)
    if "shared_intermediate" in values and "shared_experts" not in values:
        values["shared_experts"] = 1  # Qwen2-MoE: one shared expert of that size
    routed_everywhere = (
        config.get("mlp_only_layers") == [] and config.get("decoder_sparse_step", 1) == 1
    )
    if "dense_layers" not in values and routed_everywhere:
        values["dense_layers"] = 0  # Qwen-MoE: every layer's MLP is routed experts
    _sliding(config, values)
    return ModelFacts(**values)


def _sliding(config: dict, values: dict[str, Any]) -> None:
    """The window and the layers that use it: ``layer_types`` when the config lists them
    (gpt-oss alternates), else Qwen's rule (layers from ``max_window_layers`` on, only with
    ``use_sliding_window``). Qwen2 configs carry a window they switch off."""
    if config.get("use_sliding_window") is False:
        values.pop("sliding_window", None)
    if "sliding_window" not in values:
        return
    kinds = config.get("layer_types")
    if isinstance(kinds, list):
        values["sliding_window_layers"] = sum(kind == "sliding_attention" for kind in kinds)
    elif config.get("use_sliding_window") is True and "layers" in values:
        first = _int(config.get("max_window_layers"))
        if first is not None:
            values["sliding_window_layers"] = max(values["layers"] - first, 0)


class CatalogEntry(BaseModel):
    """One published model in ``models.yaml``."""

    model_config = ConfigDict(extra="forbid")

    hf_id: str = Field(description="Hugging Face repository id, e.g. `meta-llama/Llama-3.1-70B`.")
    source: str = Field(
        description="URL of the config.json or model card the facts were checked against."
    )
    aliases: list[str] = Field(
        default_factory=list, description="Other repository ids with the same architecture."
    )
    facts: ModelFacts


@cache
def _catalog() -> dict[str, CatalogEntry]:
    text = resources.files("pocforge.catalog").joinpath("models.yaml").read_text()
    return {name: CatalogEntry(**entry) for name, entry in yaml.safe_load(text).items()}


@cache
def _index() -> dict[str, str]:
    """Lower-cased catalog name, hf_id and aliases -> catalog name."""
    index: dict[str, str] = {}
    for name, entry in _catalog().items():
        for key in (name, entry.hf_id, *entry.aliases):
            index[key.lower()] = name
    for name, entry in _catalog().items():  # a repository's name alone, where not taken
        for key in (entry.hf_id, *entry.aliases):
            index.setdefault(key.rsplit("/", 1)[-1].lower(), name)
    return index


# A checkpoint variant's suffixes: its quantization (`Qwen/Qwen3-30B-A3B-FP8`,
# `…-Instruct-AWQ-INT4`) and its tuning; the architecture is the base model's.
_QUANTIZED = re.compile(
    r"(-(fp8(-dynamic|-block)?|awq(-int4)?|gptq(-int[48])?|int[48]|w8a8|w4a16|nvfp4|mxfp4|fp4|bnb-4bit))+$"
)


def _catalog_name(source: str) -> str | None:
    """The catalog name ``source`` refers to (case-insensitive), or None. A checkpoint
    variant resolves to its base model's entry: quantized (``-FP8``, ``-AWQ``…), tuned
    (``-Instruct``), or republished under another owner (``neuralmagic/…``)."""
    key = source.strip().lower()
    base = _QUANTIZED.sub("", key)
    index = _index()
    for candidate in (key, base, base.removesuffix("-instruct")):
        for name in (candidate, candidate.rsplit("/", 1)[-1]):
            if name in index:
                return index[name]
    return None


def catalog_names() -> list[str]:
    return list(_catalog())


def catalog_entry(name: str) -> ModelFacts:
    """Facts of a catalog model, by catalog name or Hugging Face id; raises ``KeyError``
    naming the known models."""
    found = _catalog_name(name)
    if found is None:
        raise KeyError(f"unknown model {name!r} (known: {', '.join(_catalog())})")
    return _catalog()[found].facts.model_copy()


def model_facts(
    source: str, base_dir: Path | None = None, overrides: ModelFacts | None = None
) -> ModelFacts:
    """Facts for a model: its local ``config.json`` if ``source`` is a folder with one, else
    the catalog entry ``source`` names (if any), then overrides."""
    facts = None
    folder = Path(source)
    if base_dir is not None and not folder.is_absolute():
        folder = base_dir / folder
    config = folder / "config.json"
    if config.is_file():
        # an unreadable config is as good as none: the catalog and the overrides still apply
        with contextlib.suppress(OSError, ValueError):
            facts = facts_from_config(json.loads(config.read_text()))
    if facts is None:
        name = _catalog_name(source)
        facts = catalog_entry(name) if name is not None else ModelFacts()
    if overrides is not None:
        facts = facts.model_copy(update=overrides.model_dump(exclude_none=True))
    return facts
