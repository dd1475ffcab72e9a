"""The kit's SGLang plugin inside a real SGLang CPU server (its own environment, with
pocforge-kernels installed and the kit not) started by the kit's adapter: SGLang finds the
plugin's entry point; its class hooks make RMSNorm, SiluAndMul and RotaryEmbedding the kit's in the
scheduler process, their Triton kernels (interpreted) run there, and greedy outputs
equal those of a plain SGLang server on the same tiny Llama: the session's
(``sglang_llama``, shared with ``tests/frameworks/test_sglang_server.py``), whose engine
arguments the plugin server has too (``tests/servers.py``).  One server start of its own."""

from __future__ import annotations

import pytest

from ..servers import SGLANG_ENGINE_ARGS
from .plugin_fixtures import PROMPTS, Run, greedy, query_running, serve_and_query

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

KERNELS = ["rms_norm", "silu_and_mul", "rotary_embedding"]
REPLACED = {
    "RMSNorm": "PocforgeRMSNorm",
    "SiluAndMul": "PocforgeSiluAndMul",
    "RotaryEmbedding": "PocforgeRotaryEmbedding",
}
RAN = ["rms_norm", "fused_add_rms_norm", "silu_and_mul", "rotary_embedding"]


def greedy_tokens(base: str) -> list[dict]:
    return greedy(base, token_ids=False)


@pytest.fixture(scope="module")
def with_plugin(tiny_llama, tmp_path_factory):
    serving = {"kernels": KERNELS, "engine_args": SGLANG_ENGINE_ARGS}
    folder = tmp_path_factory.mktemp("sglang-plugin")
    (served,) = serve_and_query(Run("sglang", folder, tiny_llama, greedy_tokens, serving))
    return served


@pytest.fixture(scope="module")
def plain(sglang_llama):
    """The session's plain server on the same model (``tests/conftest.py``)."""
    return query_running(sglang_llama, greedy_tokens)


def test_server_builds_the_kits_layers_and_runs_its_kernels(with_plugin):
    """In the server's process group, each hooked class is the kit's, picks the plugin
    backend, and each kit kernel ran (Triton, not the reference) where it was built."""
    proof = with_plugin.proof()
    built = {}
    for in_tree, cls in REPLACED.items():
        line = f"{in_tree} -> pocforge_kernels.integrations.sglang_layers.{cls} (backend plugin)"
        assert line in proof, f"no line {line!r} in the server log"
        built[in_tree] = proof[line]
    assert set(built.values()) <= with_plugin.group_pids
    ran = {m.split(" ran ")[0]: pid for m, pid in proof.items() if " ran (triton) on " in m}
    assert sorted(ran) == sorted(RAN)
    assert set(ran.values()) == set(built.values())
    assert not [m for m in proof if "runs SGLang's own path" in m]  # the kit took every call
    command = with_plugin.log.splitlines()[0]
    assert "POCFORGE_SGLANG_KERNELS=rms_norm,silu_and_mul,rotary_embedding" in command


def test_plain_server_is_untouched(plain):
    """Without POCFORGE_SGLANG_KERNELS the installed plugin loads nothing of the kit."""
    assert plain.proof() == {}


def test_greedy_outputs_match_plain_sglang(with_plugin, plain):
    """Same tokens for every prompt, log-probabilities equal to fp32 rounding."""
    assert len(with_plugin.outputs) == len(plain.outputs) == len(PROMPTS)
    for kit, ref in zip(with_plugin.outputs, plain.outputs, strict=True):
        assert kit["tokens"] == ref["tokens"]
        assert kit["logprobs"] == pytest.approx(ref["logprobs"], abs=1e-4)
