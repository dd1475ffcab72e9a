"""Each framework's own parser rejects a bad launch before anything starts.

These run the real vLLM, SGLang and DeepSpeed argument/config code (in subprocesses, SGLang
in its own environment), so they skip when that framework is not installed.
"""

from __future__ import annotations

import pytest

from pocforge.frameworks import ADAPTERS, LaunchContext
from pocforge.frameworks.argcheck.run import ArgcheckUnavailable
from pocforge.frameworks.deepspeed import check_ds_config, ds_config
from pocforge.spec import load_spec

from ..conftest import REPO

CTX = LaunchContext.local(REPO)
pytestmark = pytest.mark.integration


def checked(framework: str, launches) -> list[str]:
    try:
        return ADAPTERS[framework].check(launches, CTX)
    except ArgcheckUnavailable as exc:
        pytest.skip(str(exc))


def demo_with(**engine_args):
    spec = load_spec(REPO / "pocs" / "demo" / "poc.yaml")
    spec.serving.engine_args.update(engine_args)
    return spec


def test_vllm_accepts_every_example_and_rejects_a_typo():
    good = ADAPTERS["vllm"].plan(demo_with(), CTX)
    bad = ADAPTERS["vllm"].plan(demo_with(**{"max-num-seqz": 4}), CTX)
    worse = ADAPTERS["vllm"].plan(demo_with(**{"max-num-seqs": "many"}), CTX)
    problems = checked("vllm", good + bad + worse)
    assert len(problems) == 2, problems
    assert "vLLM rejects the arguments: unrecognized arguments: --max-num-seqz" in problems[0]
    assert "argument --max-num-seqs: invalid int value: 'many'" in problems[1]


def test_sglang_rejects_a_typo_and_accepts_the_multi_node_example():
    example = load_spec(REPO / "pocs" / "deepseek-v3-fp8-mi355x-sglang" / "poc.yaml")
    launches = ADAPTERS["sglang"].plan(example, CTX)
    example.serving.engine_args["chunked-prefil-size"] = 1
    launches += ADAPTERS["sglang"].plan(example, CTX)[:1]
    problems = checked("sglang", launches)
    assert problems == [
        "node 0: SGLang rejects the arguments: unrecognized arguments: --chunked-prefil-size 1"
    ]


def test_deepspeed_config_checked_by_deepspeed_and_for_silent_keys():
    spec = load_spec(REPO / "pocs" / "demo" / "poc.yaml")
    config = ds_config(spec)
    try:
        assert check_ds_config(config, CTX.python) == []
        config["zero_optimisation"] = {"stage": 3}  # the typo DeepSpeed would swallow
        config["zero_optimization"]["stages"] = 2
        problems = check_ds_config(config, CTX.python)
    except ArgcheckUnavailable as exc:
        pytest.skip(str(exc))
    assert any("stages" in p and "Extra inputs are not permitted" in p for p in problems), problems
    assert "unknown top-level key 'zero_optimisation': DeepSpeed ignores it silently" in problems
