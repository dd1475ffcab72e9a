"""A model's shape as the planner needs it: parameters by part, FLOPs and KV bytes per token.

Everything is derived from :class:`pocforge.catalog.ModelFacts` (a config.json, the
shipped catalog or the spec's ``model.facts``) for a decoder-only transformer:

- attention: GQA (``q, k, v, o`` projections of ``head_dim``) or MLA (DeepSeek-V2/V3's
  low-rank query and a ``kv_lora_rank`` latent with a decoupled rotary key);
- MLP: gated (three matrices) for the first ``dense_layers`` layers (all of them for a
  dense model), routed experts of ``moe_intermediate`` plus shared experts and a router for
  the others;
- embedding and LM head (tied or not).

Biases, norms and attention sinks are left out of the parts (they are under 0.1% of any
model in the catalog) but norms are counted in :attr:`Shape.params`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from pocforge.catalog import ModelFacts


class ShapeError(ValueError):
    """The facts do not describe a model the planner can size (names the missing field)."""


@dataclass(frozen=True)
class Shape:
    """Parameters and per-token costs of one model (counts, not bytes)."""

    facts: ModelFacts

    def __post_init__(self) -> None:
        missing = [
            f for f in ("layers", "hidden", "heads", "vocab") if getattr(self.facts, f) is None
        ]
        if missing:
            raise ShapeError(f"model facts lack {', '.join(missing)}")
        if not self.facts.is_moe and self.facts.intermediate is None:
            raise ShapeError("model facts lack intermediate (the MLP size)")

    # ------------------------------------------------------------------ sizes
    @property
    def layers(self) -> int:
        return self.facts.layers  # type: ignore[return-value]

    @property
    def hidden(self) -> int:
        return self.facts.hidden  # type: ignore[return-value]

    @property
    def heads(self) -> int:
        return self.facts.heads  # type: ignore[return-value]

    @property
    def kv_heads(self) -> int:
        return self.facts.kv_heads or self.heads

    @property
    def head_dim(self) -> int:
        return self.facts.head_dim or self.hidden // self.heads

    @property
    def is_moe(self) -> bool:
        return bool(self.facts.is_moe)

    @property
    def is_mla(self) -> bool:
        return self.facts.is_mla

    @property
    def moe_layers(self) -> int:
        """Layers whose MLP is routed experts (all after the leading dense ones)."""
        return self.layers - (self.facts.dense_layers or 0) if self.is_moe else 0

    @property
    def dense_layers(self) -> int:
        return self.layers - self.moe_layers

    @property
    def experts(self) -> int:
        return self.facts.experts or 0 if self.is_moe else 0

    @property
    def top_k(self) -> int:
        return (self.facts.top_k or 1) if self.is_moe else 0

    @property
    def qk_head_dim(self) -> int:
        """The width of one head's query·key product (MLA: nope + rope parts)."""
        if self.is_mla:
            return (self.facts.qk_nope_head_dim or self.head_dim) + (
                self.facts.qk_rope_head_dim or 0
            )
        return self.head_dim

    @property
    def v_head_dim(self) -> int:
        return (self.facts.v_head_dim or self.head_dim) if self.is_mla else self.head_dim

    # ------------------------------------------------------------------ parameters by part
    @cached_property
    def attention_params(self) -> int:
        """One layer's attention projections."""
        d, h = self.hidden, self.heads
        if not self.is_mla:
            return d * h * self.head_dim * 2 + d * self.kv_heads * self.head_dim * 2
        f = self.facts
        latent, rope = f.kv_lora_rank or 0, f.qk_rope_head_dim or 0
        q_out = h * self.qk_head_dim
        q = d * f.q_lora_rank + f.q_lora_rank * q_out if f.q_lora_rank else d * q_out
        nope = f.qk_nope_head_dim or self.head_dim
        kv = d * (latent + rope) + latent * h * (nope + self.v_head_dim)
        return q + kv + h * self.v_head_dim * d

    @property
    def dense_mlp_params(self) -> int:
        """One dense layer's gated MLP."""
        return 3 * self.hidden * (self.facts.intermediate or 0)

    @property
    def expert_params(self) -> int:
        """One routed expert (gated)."""
        width = self.facts.moe_intermediate or self.facts.intermediate or 0
        return 3 * self.hidden * width

    @property
    def shared_params(self) -> int:
        """One MoE layer's shared expert(s) together."""
        f = self.facts
        if not self.is_moe or not (f.shared_experts or f.shared_intermediate):
            return 0
        width = f.shared_intermediate or (f.shared_experts or 0) * (
            f.moe_intermediate or f.intermediate or 0
        )
        return 3 * self.hidden * width

    @property
    def router_params(self) -> int:
        return self.hidden * self.experts

    @property
    def embedding_params(self) -> int:
        return self.facts.vocab * self.hidden  # type: ignore[operator]

    @property
    def head_params(self) -> int:
        """The LM head (0 when tied to the embedding: the same matrix)."""
        return 0 if self.facts.tie_embeddings else self.embedding_params

    def _count(self, experts_per_moe_layer: int) -> int:
        per_moe = (
            experts_per_moe_layer * self.expert_params + self.shared_params + self.router_params
        )
        return (
            self.layers * (self.attention_params + 2 * self.hidden)
            + self.dense_layers * self.dense_mlp_params
            + self.moe_layers * per_moe
            + self.embedding_params
            + self.head_params
            + self.hidden
        )

    @cached_property
    def params(self) -> int:
        """Every parameter (norms included)."""
        return self._count(self.experts)

    @cached_property
    def active_params(self) -> int:
        """Parameters one token passes through (routed experts: its top-k)."""
        return self._count(self.top_k)

    @property
    def matmul_params(self) -> int:
        """Active parameters that are matrix multiplies per token: all but the embedding
        lookup (a tied head is a matmul with the embedding's matrix)."""
        return (
            self.active_params
            - self.embedding_params
            + (self.embedding_params if self.facts.tie_embeddings else 0)
            - (2 * self.layers + 1) * self.hidden
        )

    # ------------------------------------------------------------------ per-token costs
    def attention_flops(self, context: float, causal_prefill: bool = False) -> float:
        """Forward FLOPs of the score and value products for one token attending to
        ``context`` tokens, over every layer (sliding-window layers see at most the window).
        ``causal_prefill``: the token is one of a prompt of ``context`` tokens, so it sees
        half of it on average."""
        seen = context / 2 if causal_prefill else context
        full, sliding = self._layer_split()
        window = self.facts.sliding_window or seen
        per_ctx = 2 * self.heads * (self.qk_head_dim + self.v_head_dim)
        return per_ctx * (full * seen + sliding * min(seen, window))

    def _layer_split(self) -> tuple[int, int]:
        sliding = self.facts.sliding_window_layers or 0 if self.facts.sliding_window else 0
        return self.layers - sliding, sliding

    def kv_bytes_per_token(self, dtype_bytes: float) -> float:
        """KV cache of one token over every full-attention layer (GQA: 2·kv_heads·head_dim
        per layer; MLA: the latent plus the rotary key, kv_lora_rank + qk_rope_head_dim)."""
        full, _ = self._layer_split()
        return full * self.kv_width * dtype_bytes

    def sliding_kv_bytes(self, tokens: float, dtype_bytes: float) -> float:
        """KV cache of a request of ``tokens`` in the sliding-window layers (capped)."""
        _, sliding = self._layer_split()
        if not sliding:
            return 0.0
        return (
            sliding * self.kv_width * dtype_bytes * min(tokens, self.facts.sliding_window or tokens)
        )

    @property
    def kv_width(self) -> int:
        """Cached values per token per layer."""
        if self.is_mla:
            return (self.facts.kv_lora_rank or 0) + (self.facts.qk_rope_head_dim or 0)
        return 2 * self.kv_heads * self.head_dim

    def request_kv_bytes(self, tokens: float, dtype_bytes: float) -> float:
        """The whole KV cache of one request of ``tokens`` (prompt + output)."""
        return tokens * self.kv_bytes_per_token(dtype_bytes) + self.sliding_kv_bytes(
            tokens, dtype_bytes
        )
