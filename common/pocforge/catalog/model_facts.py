"""Model facts: the handful of architecture numbers the planner and the rules need.

They come from a Hugging Face ``config.json`` when the model folder is at hand, and from
the spec's ``model.facts`` for models whose config is not (overrides win).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

# config.json key(s) -> our field; the first key present wins (Llama, Mixtral, Qwen-MoE, DeepSeek).
_HF_KEYS: dict[str, tuple[str, ...]] = {
    "layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "hidden": ("hidden_size", "n_embd", "d_model"),
    "heads": ("num_attention_heads", "n_head"),
    "kv_heads": ("num_key_value_heads",),
    "intermediate": ("intermediate_size",),
    "vocab": ("vocab_size",),
    "experts": ("num_local_experts", "n_routed_experts", "num_experts"),
    "top_k": ("num_experts_per_tok",),
    "moe_intermediate": ("moe_intermediate_size",),
    "kv_lora_rank": ("kv_lora_rank",),
    "q_lora_rank": ("q_lora_rank",),
    "qk_rope_head_dim": ("qk_rope_head_dim",),
    "max_position": ("max_position_embeddings",),
}


class ModelFacts(BaseModel):
    """Architecture facts; ``None`` means not known."""

    model_config = ConfigDict(extra="forbid")

    layers: int | None = Field(None, ge=1, description="Transformer layers.")
    hidden: int | None = Field(None, ge=1, description="Hidden size.")
    heads: int | None = Field(None, ge=1, description="Attention (query) heads.")
    kv_heads: int | None = Field(
        None, ge=1, description="Key/value heads (GQA); equals heads for MHA."
    )
    intermediate: int | None = Field(None, ge=1, description="Dense MLP intermediate size.")
    vocab: int | None = Field(None, ge=1, description="Vocabulary size.")
    experts: int | None = Field(
        None, ge=0, description="Routed experts per MoE layer; 0 or unset for a dense model."
    )
    top_k: int | None = Field(None, ge=1, description="Experts each token is routed to.")
    moe_intermediate: int | None = Field(None, ge=1, description="Intermediate size of one expert.")
    kv_lora_rank: int | None = Field(
        None, ge=1, description="MLA latent (compressed KV) rank, e.g. 512."
    )
    q_lora_rank: int | None = Field(None, ge=1, description="MLA query low-rank size.")
    qk_rope_head_dim: int | None = Field(
        None, ge=1, description="MLA rotary part of each head, e.g. 64."
    )
    max_position: int | None = Field(None, ge=1, description="Longest context the model supports.")

    @property
    def is_moe(self) -> bool | None:
        """True/False when known, None when the facts do not say."""
        return None if self.experts is None else self.experts > 1

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank is not None


def facts_from_config(config: dict) -> ModelFacts:
    """Facts from a parsed Hugging Face ``config.json``."""
    values = {}
    for field, keys in _HF_KEYS.items():
        for key in keys:
            if isinstance(config.get(key), int) and not isinstance(config.get(key), bool):
                values[field] = config[key]
                break
    return ModelFacts(**values)


def model_facts(
    source: str, base_dir: Path | None = None, overrides: ModelFacts | None = None
) -> ModelFacts:
    """Facts for a model: its local ``config.json`` if ``source`` is a folder, then overrides."""
    facts = ModelFacts()
    folder = Path(source)
    if base_dir is not None and not folder.is_absolute():
        folder = base_dir / folder
    config = folder / "config.json"
    if config.is_file():
        # an unreadable config is as good as none: the overrides still apply
        with contextlib.suppress(OSError, ValueError):
            facts = facts_from_config(json.loads(config.read_text()))
    if overrides is not None:
        facts = facts.model_copy(update=overrides.model_dump(exclude_none=True))
    return facts
