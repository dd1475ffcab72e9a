"""Each framework's own parser rejects a bad launch before anything starts.

These run the real vLLM, SGLang and DeepSpeed argument/config code (in subprocesses, SGLang
in its own environment), so they skip when that framework is not installed.
"""

from __future__ import annotations

import json

import pytest

from pocforge.frameworks import ADAPTERS, LaunchContext
from pocforge.frameworks.argcheck.run import ArgcheckUnavailable
from pocforge.spec import load_spec

from ..conftest import REPO

CTX = LaunchContext.local(REPO)
pytestmark = pytest.mark.integration


def rejected(framework: str, launches) -> list[tuple[int, str]]:
    """(index of the rejected launch, message) for each launch the framework refuses."""
    try:
        found = ADAPTERS[framework].check(launches, CTX)
    except ArgcheckUnavailable as exc:
        pytest.skip(str(exc))
    return [(next(i for i, x in enumerate(launches) if x is launch), msg) for launch, msg in found]


def load(name: str):
    return load_spec(REPO / "pocs" / name / "poc.yaml")


def test_vllm_rejects_a_typo_and_a_bad_value_with_its_own_message():
    launches = []
    for extra in (
        {},
        {"max-num-seqz": 4},
        {"max-num-seqs": "many"},
        {"max-num-seqs": -3},  # parses as an int: vLLM's SchedulerConfig refuses it
        {"gpu-memory-utilization": 1.5},  # and its CacheConfig this
    ):
        spec = load("demo")
        spec.serving.engine_args.update(extra)
        launches += ADAPTERS["vllm"].plan(spec, CTX)
    found = rejected("vllm", launches)
    assert [index for index, _ in found] == [1, 2, 3, 4], found
    assert "vLLM rejects the arguments: unrecognized arguments: --max-num-seqz" in found[0][1]
    assert "argument --max-num-seqs: invalid int value: 'many'" in found[1][1]
    assert "--max-num-seqs -3: Input should be greater than or equal to 1" in found[2][1]
    assert "--gpu-memory-utilization 1.5: Input should be less than or equal to 1" in found[3][1]


def test_sglang_rejects_a_typo_and_accepts_the_multi_node_example():
    example = load("deepseek-v3-fp8-mi355x-sglang")
    launches = ADAPTERS["sglang"].plan(example, CTX)
    example.serving.engine_args["chunked-prefil-size"] = 1
    launches += ADAPTERS["sglang"].plan(example, CTX)[:1]
    assert rejected("sglang", launches) == [
        (2, "SGLang rejects the arguments: unrecognized arguments: --chunked-prefil-size 1")
    ]


def test_deepspeed_config_checked_by_deepspeed_and_for_silent_keys():
    good = ADAPTERS["deepspeed"].plan(load("demo"), CTX)[0]
    bad = ADAPTERS["deepspeed"].plan(load("demo"), CTX)[0]
    config = json.loads(bad.files["ds_config.json"])
    config["zero_optimisation"] = {"stage": 3}  # the typo DeepSpeed would swallow
    config["zero_optimization"]["stages"] = 2
    bad.files["ds_config.json"] = json.dumps(config)
    ((index, message),) = rejected("deepspeed", [good, bad])
    assert index == 1
    assert "stages" in message and "Extra inputs are not permitted" in message
    assert "unknown top-level key 'zero_optimisation': DeepSpeed ignores it silently" in message
