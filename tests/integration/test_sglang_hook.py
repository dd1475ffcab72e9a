"""The kit's SGLang plugin inside a real SGLang CPU server (its own environment, with
pocforge-kernels installed and the kit not) started by the kit's adapter: SGLang finds the
plugin's entry point; its class hooks make RMSNorm, SiluAndMul and RotaryEmbedding the kit's in the
scheduler process, their Triton kernels (interpreted) run there, and greedy outputs
equal those of a plain SGLang server on the same tiny Llama: the session's
(``sglang_llama``, shared with ``tests/frameworks/test_sglang_server.py``), whose engine
arguments the plugin server has too (``tests/servers.py``).  One server start of its own. A
broken kernel failing parity, and its bisection, are proven once on real servers, on vLLM
(``test_gates.py``); the bisection's search at unit level (``tests/quality/test_parity.py``)."""

from __future__ import annotations

import json

import pytest

from pocforge.quality.parity import collect, compare
from pocforge.results.store import RunStore
from pocforge.results.verdicts import judge_run
from pocforge.runner.gates import baseline_spec, describe
from pocforge.spec import load_spec
from pocforge.spec.acceptance_schema import AcceptanceSpec
from pocforge.spec.gates import ParityGate

from ..servers import SGLANG_ENGINE_ARGS
from .plugin_fixtures import PROMPTS, Run, greedy, query_running, serve_and_query

pytestmark = [
    pytest.mark.integration,
    pytest.mark.budget(300, "two SGLang starts at once with the kit's kernels interpreted"),
]

KERNELS = ["rms_norm", "silu_and_mul", "rotary_embedding"]
REPLACED = {
    "RMSNorm": "PocforgeRMSNorm",
    "SiluAndMul": "PocforgeSiluAndMul",
    "RotaryEmbedding": "PocforgeRotaryEmbedding",
}
RAN = ["rms_norm", "fused_add_rms_norm", "silu_and_mul", "rotary_embedding"]


GATE = ParityGate(prompts=8, max_tokens=12)  # the parity stage's prompts and top-k


def greedy_tokens(base: str) -> dict:
    """The greedy tokens of the hook's own check, and the parity gate's answers."""
    return {"greedy": greedy(base, token_ids=False), "parity": collect(base, "tiny", GATE)}


@pytest.fixture(scope="module")
def started(tiny_llama, tmp_path_factory):
    """The kit's kernels in SGLang, and the spec it was started from."""
    serving = {"kernels": KERNELS, "engine_args": SGLANG_ENGINE_ARGS}
    folder = tmp_path_factory.mktemp("sglang-plugin")
    (kit,) = serve_and_query(Run("sglang", folder / "kit", tiny_llama, greedy_tokens, serving))
    return kit, load_spec(folder / "kit" / "cpu-serve" / "poc.yaml")


@pytest.fixture(scope="module")
def with_plugin(started):
    return started[0]


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
    kits, refs = with_plugin.outputs["greedy"], plain.outputs["greedy"]
    assert len(kits) == len(refs) == len(PROMPTS)
    for kit, ref in zip(kits, refs, strict=True):
        assert kit["tokens"] == ref["tokens"]
        assert kit["logprobs"] == pytest.approx(ref["logprobs"], abs=1e-4)


def test_parity_gate_passes_the_kit_kernels(started, plain, tmp_path):
    """The parity stage's comparison on SGLang: plain SGLang as the baseline, the kit's
    kernels pass the criteria, the candidate naming the kit's kernels. (That a broken
    kernel fails them, and which, is proven on vLLM: ``test_gates.py``.)"""
    with_plugin, spec = started
    baseline = describe(baseline_spec(spec))
    criteria = AcceptanceSpec.model_validate(
        {"criteria": ["parity.token_agreement >= 0.99", "parity.max_logprob_diff <= 0.02"]}
    ).criteria
    result = compare(
        plain.outputs["parity"], with_plugin.outputs["parity"], GATE, baseline, describe(spec)
    )
    assert result.candidate.endswith("kit kernels: rms_norm, silu_and_mul, rotary_embedding")
    run = RunStore(tmp_path).create(spec)
    with run.stage("parity") as stage:
        stage.write_json("result.json", json.loads(result.model_dump_json()))
    run.finish()
    assert [v.verdict for v in judge_run(run, criteria)] == ["pass", "pass"], result
