"""Startup and training timeouts follow the model's size (weights at 1 GB/s plus 300 s of
compiling; steps at 5% of the GPU's peak), and the spec can set them."""

from __future__ import annotations

import math

import pytest
import yaml

from pocforge.catalog import gpu
from pocforge.frameworks.startup import (
    COMPILE_S,
    STEP_OVERHEAD_S,
    TRAIN_FLOOR,
    estimate_parameters,
    startup_timeout_s,
    training_timeout_s,
    weights_bytes,
)
from pocforge.spec import SpecError, load_poc, load_spec
from pocforge.spec.planning import facts_of


def test_the_estimate_is_exact_for_a_real_llama_checkpoint(tiny_llama):
    """Counted from the facts of the tiny Llama's config.json, checked against the
    tensors in its safetensors file."""
    from safetensors import safe_open

    from pocforge.catalog import model_facts

    with safe_open(str(tiny_llama / "model.safetensors"), framework="np") as weights:
        total = sum(math.prod(weights.get_slice(k).get_shape()) for k in weights.keys())  # noqa: SIM118
    assert estimate_parameters(model_facts(str(tiny_llama))) == total


def test_a_70b_model_waits_longer_than_an_8b_one():
    """bf16 weights at 1 GB/s: Llama-3.1-70B (141 GB) gets 442 s, an 8B (16 GB) 317 s;
    the DeepSeek-V3 POC's block-FP8 weights (1 byte per parameter) about 1000 s."""
    big, small = load_poc("llama-3.1-70b-bf16-mi300x-vllm"), load_poc("_template")
    assert startup_timeout_s(big) == math.ceil(weights_bytes(big) / 1e9 + COMPILE_S) == 442
    assert startup_timeout_s(small) == 317
    deepseek = load_poc("deepseek-v3-fp8-mi355x-sglang")
    params = estimate_parameters(facts_of(deepseek))
    assert weights_bytes(deepseek) == params  # fp8_block: one byte per parameter
    assert 950 < startup_timeout_s(deepseek) < 1050


def test_local_weights_are_measured_not_estimated(tmp_path, tiny_llama):
    spec = write_spec(tmp_path, {"id": str(tiny_llama), "dtype": "float32"})
    size = (tiny_llama / "model.safetensors").stat().st_size
    assert weights_bytes(spec) == size
    assert startup_timeout_s(spec) == math.ceil(size / 1e9 + COMPILE_S)


def test_training_allows_every_step_at_five_percent_of_the_peak():
    spec = load_poc("llama-3-8b-bf16-mi300x-deepspeed")
    training = spec.training
    params = estimate_parameters(facts_of(spec))
    tokens = training.micro_batch * training.grad_accum * training.seq_len
    step = 6 * params * tokens / (TRAIN_FLOOR * gpu("MI300X").bf16_tflops * 1e12)
    expected = math.ceil(params * 2 / 1e9 + COMPILE_S) + training.steps * (step + STEP_OVERHEAD_S)
    assert training_timeout_s(spec) == pytest.approx(expected, abs=1)
    assert training_timeout_s(spec) > 1800  # the old fixed cap would have cut it short


def test_the_spec_sets_both(tmp_path):
    spec = write_spec(
        tmp_path,
        {"id": "org/m", "facts": {"layers": 2, "hidden": 64, "vocab": 100, "experts": 0}},
        serving={"startup_timeout_s": 1234},
        training={"timeout_s": 42},
    )
    assert startup_timeout_s(spec) == 1234 and training_timeout_s(spec) == 42
    with pytest.raises(
        SpecError, match=r"poc.yaml:\d+: serving.startup_timeout_s: input should be greater than 0"
    ):
        write_spec(tmp_path, {"id": "org/m"}, serving={"startup_timeout_s": 0})


def write_spec(tmp_path, model: dict, serving: dict | None = None, training: dict | None = None):
    spec = {
        "poc": {"name": "size", "customer": "c", "owner": "o"},
        "model": model,
        "cluster": {"gpu": "MI300X", "nodes": 1, "gpus_per_node": 1},
        "serving": {
            "framework": "vllm",
            "workloads": [
                {
                    "name": "w",
                    "dataset": {"kind": "random", "isl": 8, "osl": 8},
                    "load": {"concurrency": [1]},
                    "num_prompts": 1,
                }
            ],
            **(serving or {}),
        },
        "training": {"framework": "deepspeed", "seq_len": 8, "steps": 1, **(training or {})},
    }
    path = tmp_path / "size" / "poc.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(yaml.safe_dump(spec))
    return load_spec(path)
