"""Parameters and FLOPs per token do not depend on the ZeRO stage: real DeepSpeed trains the
kit's tiny Llama at ZeRO-2 and ZeRO-3 (2 gloo ranks, the demo's layout: the session's
``zero_runs``) and both summaries report the checkpoint's own parameter count and the FLOPs
per token that follow from it."""

from __future__ import annotations

import json
import math

import pytest

from pocforge.training.flops import flops_per_token

pytestmark = [
    pytest.mark.integration,
    pytest.mark.budget(300, "the session's DeepSpeed ZeRO-2 and ZeRO-3 runs on 2 gloo ranks"),
]


def checkpoint_counts(model_dir) -> tuple[int, int, int]:
    """(all, input embedding, LM head) elements, read from the weights file, not a model."""
    from safetensors import safe_open

    with safe_open(str(model_dir / "model.safetensors"), framework="np") as weights:
        shapes = {name: weights.get_slice(name).get_shape() for name in weights.keys()}  # noqa: SIM118
    sizes = {name: math.prod(shape) for name, shape in shapes.items()}
    return sum(sizes.values()), sizes["model.embed_tokens.weight"], sizes["lm_head.weight"]


def test_zero3_counts_the_parameters_it_partitioned(zero_runs, tiny_llama):
    """ZeRO-3 reports what ZeRO-2 reports, and both are the checkpoint's own numbers
    (before the fix ZeRO-3 said 0 parameters and about 40% of the FLOPs)."""
    total, embed, head = checkpoint_counts(tiny_llama)
    (zero2, _), (zero3, _) = zero_runs[2], zero_runs[3]
    assert zero2.status == zero3.status == "completed"
    assert zero3.zero_stage == 3 and zero2.zero_stage == 2
    assert zero3.parameters == zero2.parameters == total
    assert zero3.active_parameters == zero2.active_parameters == total - embed - head
    assert zero3.flops_per_token == zero2.flops_per_token
    # FLOPs/token from the checkpoint's count: 6·N + 6·d·V + 12·L·d·T (training/flops.py).
    config = json.loads((tiny_llama / "config.json").read_text())
    expected = flops_per_token(
        total - embed - head,
        config["hidden_size"],
        config["vocab_size"],
        config["num_hidden_layers"],
        zero2.seq_len,
    )
    assert zero3.flops_per_token == pytest.approx(expected)
