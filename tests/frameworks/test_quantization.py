"""Every ``model.quantization`` value reaches each serving framework as a flag it knows, or
``validate`` refuses it naming what to write instead; none is dropped on the way (vLLM
used to drop ``fp8_block`` and ``int8`` silently, SGLang ``fp8_block``)."""

from __future__ import annotations

import json
from typing import get_args

import pytest
import yaml

from pocforge.frameworks import ADAPTERS, LaunchContext
from pocforge.spec import SpecError, load_spec
from pocforge.spec.model_schema import ModelSpec

QUANTIZATIONS = get_args(ModelSpec.model_fields["quantization"].annotation)
# What each value becomes: the --quantization argument, None for none, or the refusal.
EXPECTED = {
    "vllm": {
        "none": None,
        "fp8": "fp8",
        "fp8_block": "fp8",
        "int8": "vllm has no --quantization for int8: an INT8 checkpoint",
        "awq": "awq",
        "gptq": "gptq",
        "mxfp4": "mxfp4",
    },
    "sglang": {
        "none": None,
        "fp8": "fp8",
        "fp8_block": "fp8",
        "int8": "w8a8_int8",
        "awq": "awq",
        "gptq": "gptq",
        "mxfp4": "mxfp4",
    },
}


def spec_file(tmp_path, framework: str, quantization: str, model_id: str = "org/dense"):
    spec = {
        "poc": {"name": "quant", "customer": "c", "owner": "o"},
        "model": {"id": model_id, "quantization": quantization, "facts": {"experts": 0}},
        "cluster": {"gpu": "MI300X", "nodes": 1, "gpus_per_node": 8},
        "serving": {
            "framework": framework,
            "parallelism": {"tp": 8},
            "workloads": [
                {
                    "name": "w",
                    "dataset": {"kind": "random", "isl": 8, "osl": 8},
                    "load": {"concurrency": [1]},
                    "num_prompts": 1,
                }
            ],
        },
    }
    path = tmp_path / "quant" / "poc.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(yaml.safe_dump(spec))
    return path


def quantization_arg(argv: list[str]) -> str | None:
    return argv[argv.index("--quantization") + 1] if "--quantization" in argv else None


def test_the_expectations_cover_every_value_the_spec_allows():
    assert set(QUANTIZATIONS) == set(EXPECTED["vllm"]) == set(EXPECTED["sglang"])


@pytest.mark.parametrize("framework", ["vllm", "sglang"])
@pytest.mark.parametrize("quantization", QUANTIZATIONS)
def test_quantization_is_a_flag_or_a_refusal(tmp_path, framework, quantization):
    expected = EXPECTED[framework][quantization]
    path = spec_file(tmp_path, framework, quantization)
    if expected is not None and " " in expected:  # a refusal
        with pytest.raises(SpecError) as info:
            load_spec(path)
        (problem,) = info.value.problems
        assert problem.path == "model.quantization" and problem.line
        assert expected in problem.message and "quantization: none" in problem.message
        return
    spec = load_spec(path)
    (launch,) = ADAPTERS[framework].plan(spec, LaunchContext(repo=tmp_path))
    assert quantization_arg(launch.argv) == expected


def test_fp8_block_needs_a_block_fp8_checkpoint_when_its_config_is_here(tmp_path):
    """A local model folder whose config.json is not block-FP8: fp8_block would be served as
    online per-tensor FP8, so validate says so; a block-FP8 config (DeepSeek-V3's
    quantization_config) is accepted."""
    model = tmp_path / "quant" / "model"
    model.mkdir(parents=True)
    (model / "config.json").write_text('{"hidden_size": 64}')
    with pytest.raises(SpecError, match="no quantization_config.weight_block_size; write fp8"):
        load_spec(spec_file(tmp_path, "sglang", "fp8_block", model_id="model"))
    # DeepSeek-V3's own quantization_config (huggingface.co/deepseek-ai/DeepSeek-V3).
    block = {
        "activation_scheme": "dynamic",
        "fmt": "e4m3",
        "quant_method": "fp8",
        "weight_block_size": [128, 128],
    }
    (model / "config.json").write_text(json.dumps({"quantization_config": block}))
    spec = load_spec(spec_file(tmp_path, "sglang", "fp8_block", model_id="model"))
    (launch,) = ADAPTERS["sglang"].plan(spec, LaunchContext(repo=tmp_path))
    assert quantization_arg(launch.argv) == "fp8"
