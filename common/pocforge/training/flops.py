"""Model FLOPs per trained token, stated so MFU can be checked by hand.

FLOPs/token = 6·N_active + 6·d·V + 12·L·d·T, where N_active counts the non-embedding
parameters one token passes through (for MoE: attention, router, shared parts and top-k of
the experts), d the hidden size, V the vocabulary, L the layers and T the sequence length.
The first two terms are the matmuls (forward 2, backward 4 per weight); the last is the
attention QKᵀ and AV products (PaLM, Chowdhery et al. 2022, appendix B).
"""

from __future__ import annotations


def numel(param) -> int:
    """Elements of ``param`` as built, also after ZeRO-3 partitioned it.

    ``deepspeed.zero.Init`` replaces a parameter's data with an empty tensor and keeps this
    rank's shard in ``ds_tensor``; the full size is in DeepSpeed's own ``ds_numel``.
    Counting ``numel()`` there gives 0 and an MFU from attention and the LM head alone.
    """
    return int(getattr(param, "ds_numel", None) or param.numel())


def count_parameters(model) -> tuple[int, int]:
    """(all trainable parameters, active non-embedding parameters) of a HF causal LM,
    the same before and after ZeRO-3 partitioning."""
    config = model.config
    total = sum(numel(p) for p in model.parameters() if p.requires_grad)
    embed = numel(model.get_input_embeddings().weight)
    head = model.get_output_embeddings()
    tied = head is not None and head.weight is model.get_input_embeddings().weight
    non_embedding = total - embed - (0 if tied or head is None else numel(head.weight))
    experts = (
        getattr(config, "num_experts", None) or getattr(config, "num_local_experts", None) or 0
    )
    top_k = getattr(config, "num_experts_per_tok", 0) or 0
    if experts and top_k:
        expert_params = sum(numel(p) for name, p in model.named_parameters() if ".experts." in name)
        non_embedding -= expert_params * (1 - top_k / experts)
    return total, int(non_embedding)


def flops_per_token(
    active_params: int, hidden: int, vocab: int, layers: int, seq_len: int
) -> float:
    return 6.0 * active_params + 6.0 * hidden * vocab + 12.0 * layers * hidden * seq_len
