"""Parameters and FLOPs per token do not depend on the ZeRO stage: real DeepSpeed trains the
kit's tiny Llama at ZeRO-2 and ZeRO-3 (2 gloo ranks, the demo's layout) and both summaries
report the checkpoint's own parameter count and the FLOPs per token that follow from it."""

from __future__ import annotations

import json
import math

import pytest
import yaml

from pocforge.frameworks import LaunchContext
from pocforge.frameworks.process import free_port
from pocforge.spec import load_spec
from pocforge.training.flops import flops_per_token
from pocforge.training.run import run_training

from ..conftest import REPO

pytestmark = [
    pytest.mark.integration,
    pytest.mark.budget(300, "DeepSpeed ZeRO-2 and ZeRO-3 on 2 gloo ranks"),
]

SEQ_LEN = 32


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    from pocforge.tiny_model.make import make_tiny

    return make_tiny(tmp_path_factory.mktemp("models") / "tiny-llama", arch="llama", seed=0)


@pytest.fixture(scope="session")
def summaries(tmp_path_factory, tiny_model):
    """One short run per stage on the same model folder: {stage: TrainingSummary}."""
    out = {}
    for stage in (2, 3):
        spec = {
            "poc": {"name": f"zero{stage}", "customer": "pocforge tests", "owner": "tests"},
            "model": {"id": str(tiny_model), "dtype": "float32"},
            "cluster": {"gpu": "cpu", "gpus_per_node": 1},
            "training": {
                "framework": "deepspeed",
                "zero_stage": stage,
                "dtype": "float32",
                "world_size": 2,
                "micro_batch": 1,
                "seq_len": SEQ_LEN,
                "steps": 2,
                "warmup_steps": 1,
            },
        }
        folder = tmp_path_factory.mktemp(f"zero{stage}") / f"zero{stage}"
        folder.mkdir()
        (folder / "poc.yaml").write_text(yaml.safe_dump(spec))
        ctx = LaunchContext.local(REPO, port=free_port())
        out[stage] = run_training(load_spec(folder / "poc.yaml"), folder / "out", ctx)
    return out


def checkpoint_counts(model_dir) -> tuple[int, int, int]:
    """(all, input embedding, LM head) elements, read from the weights file, not a model."""
    from safetensors import safe_open

    with safe_open(str(model_dir / "model.safetensors"), framework="np") as weights:
        shapes = {name: weights.get_slice(name).get_shape() for name in weights.keys()}  # noqa: SIM118
    sizes = {name: math.prod(shape) for name, shape in shapes.items()}
    return sum(sizes.values()), sizes["model.embed_tokens.weight"], sizes["lm_head.weight"]


def test_zero3_counts_the_parameters_it_partitioned(summaries, tiny_model):
    """ZeRO-3 reports what ZeRO-2 reports, and both are the checkpoint's own numbers
    (before the fix ZeRO-3 said 0 parameters and about 40% of the FLOPs)."""
    total, embed, head = checkpoint_counts(tiny_model)
    zero2, zero3 = summaries[2], summaries[3]
    assert zero2.status == zero3.status == "completed"
    assert zero3.zero_stage == 3 and zero2.zero_stage == 2
    assert zero3.parameters == zero2.parameters == total
    assert zero3.active_parameters == zero2.active_parameters == total - embed - head
    assert zero3.flops_per_token == zero2.flops_per_token
    # FLOPs/token from the checkpoint's count: 6·N + 6·d·V + 12·L·d·T (training/flops.py).
    config = json.loads((tiny_model / "config.json").read_text())
    expected = flops_per_token(
        total - embed - head,
        config["hidden_size"],
        config["vocab_size"],
        config["num_hidden_layers"],
        SEQ_LEN,
    )
    assert zero3.flops_per_token == pytest.approx(expected)
