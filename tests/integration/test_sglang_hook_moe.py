"""The kit's fused MoE inside a real SGLang CPU server (its own environment, without
pocforge installed) started by the kit's adapter on the tiny Qwen3-MoE: the plugin's class
hook makes SGLang's unquantized MoE method the kit's in the scheduler process, the kit's
``fused_experts`` (Triton, interpreted) runs there in place of SGLang's
``moe_forward_native``, and greedy outputs equal those of a plain SGLang server with the
same engine arguments (``tests/servers.py``).  Two server starts, at once; only
``fused_moe`` is selected, so the comparison isolates the experts.

The layers the kit declines (biases, other activations, EP...) do not occur in the tiny
model: one SGLang process without a server (:data:`DECLINES`) builds SGLang's method
for each of them and checks the log line and that SGLang's own path ran."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from pocforge.frameworks.sglang import SHIMS
from pocforge_kernels.integrations.sglang_hook import launch_env

from ..servers import SGLANG_ENGINE_ARGS, SGLANG_PYTHON, needs
from .plugin_fixtures import PROMPTS, PROOF_LINE, Run, greedy, serve_and_query

pytestmark = [
    pytest.mark.integration,
    pytest.mark.budget(300, "two SGLang starts at once on the tiny MoE"),
]

KERNELS = ["fused_moe"]
BUILT = (
    "UnquantizedFusedMoEMethod -> "
    "pocforge_kernels.integrations.sglang_moe.PocforgeUnquantizedFusedMoEMethod (backend plugin)"
)
# Both servers compute the experts in fp32 from the same weights and routing; they differ
# only in summation order (SGLang: per-expert F.linear, then a weighted sum; the kit:
# blocked tl.dot in fp32 "ieee", fp32 combine), about 1e-7 relative per MoE output.
# Measured here: at most 4.8e-7 (one fp32 ulp at the tiny model's log-probabilities of
# about -6.6).  1e-4, the bound of the other plugin tests, leaves a 200x margin for other
# CPUs' BLAS and threading; the tokens themselves are compared exactly, and the kernel's
# own accuracy against its reference is tests/kernels/test_fused_moe.py's job.
LOGPROB_ABS = 1e-4


def greedy_tokens(base: str) -> list[dict]:
    return greedy(base, token_ids=False)


@pytest.fixture(scope="module")
def servers(tiny_moe, tmp_path_factory):
    """The servers with and without the plugin, started together."""
    plain = {"engine_args": SGLANG_ENGINE_ARGS}
    return serve_and_query(
        Run(
            "sglang",
            tmp_path_factory.mktemp("sglang-moe-plugin"),
            tiny_moe,
            greedy_tokens,
            {"kernels": KERNELS, **plain},
        ),
        Run("sglang", tmp_path_factory.mktemp("sglang-moe-plain"), tiny_moe, greedy_tokens, plain),
    )


@pytest.fixture(scope="module")
def with_plugin(servers):
    return servers[0]


@pytest.fixture(scope="module")
def plain(servers):
    return servers[1]


def test_server_runs_the_kits_fused_experts(with_plugin):
    """In the server's process group the MoE method is the kit's and picks the plugin
    backend, every layer stays with the kit (no fallback line), and the kit's fused
    experts ran (Triton, not the reference) in the process that built the method."""
    proof = with_plugin.proof()
    assert BUILT in proof, f"no line {BUILT!r} in the server log"
    assert proof[BUILT] in with_plugin.group_pids
    assert proof[BUILT] != with_plugin.server_pid  # the scheduler, not the HTTP server
    ran = {m.split(" ran ")[0]: pid for m, pid in proof.items() if " ran (triton) on " in m}
    assert ran == {"fused_moe": proof[BUILT]}
    declined = [m for m in proof if "SGLang's MoE runs" in m or "SGLang's own" in m]
    assert declined == []
    command = with_plugin.log.splitlines()[0]
    assert "POCFORGE_SGLANG_KERNELS=fused_moe" in command and "TRITON_INTERPRET=1" in command


def test_plain_server_is_untouched(plain):
    """Without POCFORGE_SGLANG_KERNELS the installed plugin loads nothing of the kit."""
    assert plain.proof() == {}
    assert "POCFORGE_SGLANG_KERNELS" not in plain.log.splitlines()[0]


def test_greedy_outputs_match_plain_sglang(with_plugin, plain):
    """SGLang's router picks the experts either way; the kit's experts give the same
    tokens for every prompt and log-probabilities within fp32 rounding."""
    assert len(with_plugin.outputs) == len(plain.outputs) == len(PROMPTS)
    for kit, ref in zip(with_plugin.outputs, plain.outputs, strict=True):
        assert kit["tokens"] == ref["tokens"]
        assert kit["logprobs"] == pytest.approx(ref["logprobs"], abs=LOGPROB_ABS)


# Runs in SGLang's environment with pocforge-kernels installed, as in a server process: the
# plugin's hooks are applied, then SGLang's (hooked) UnquantizedFusedMoEMethod creates and
# processes the weights of a MoE layer for each configuration and runs it on routed
# tokens; SGLang's moe_forward_native on the same layer is the reference.  The layer is a
# module holding what the method reads (FusedMoE itself needs a distributed setup).
DECLINES = r"""
import json
import torch
from importlib.metadata import entry_points
(plugin,) = [e for e in entry_points(group="sglang.srt.plugins") if e.name == "pocforge_kernels"]
plugin.load()()  # what SGLang's plugin loader calls in each process
from sglang.srt.plugins.hook_registry import HookRegistry
HookRegistry.apply_hooks()
from sglang.srt.layers.moe import MoeRunnerConfig
from sglang.srt.layers.moe.fused_moe_native import moe_forward_native
from sglang.srt.layers.moe.fused_moe_triton import layer as fused_moe_layer
from sglang.srt.layers.moe.token_dispatcher import StandardDispatchOutput
from sglang.srt.layers.moe.topk import StandardTopKOutput
from sglang.srt.layers.quantization import unquant
from sglang.srt.layers.quantization.fp8 import Fp8Config, Fp8MoEMethod
from sglang.srt.runtime_context import SpawnRanks, publish
from sglang.srt.server_args import ServerArgs

from pocforge_kernels.integrations.sglang_moe import note_moe_method

publish(ServerArgs(model_path="dummy", device="cpu"), role="test",
        ranks=SpawnRanks(world_rank=0, dp_rank=None))
E, H, I, T, K = 4, 32, 16, 6, 2
gen = torch.Generator().manual_seed(0)


def build(with_bias=False, ep=1, **config):
    layer = torch.nn.Module()
    layer.moe_runner_config = MoeRunnerConfig(
        num_experts=E, num_local_experts=E, hidden_size=H, top_k=K, **config)
    layer.num_experts, layer.moe_ep_size = E, ep
    method = unquant.UnquantizedFusedMoEMethod()
    method.create_weights(layer, E, H, I, torch.float32, with_bias=with_bias)
    for param in layer.parameters():
        param.data.copy_(torch.randn(param.shape, generator=gen) / 4)
    method.create_moe_runner(layer, layer.moe_runner_config)
    method.process_weights_after_loading(layer)
    return method, layer


x = torch.randn(T, H, generator=gen)
logits = torch.randn(T, E, generator=gen)
weights, ids = logits.softmax(-1).topk(K)
topk = StandardTopKOutput(weights, ids.to(torch.int32), logits)
result = {"class": type(unquant.UnquantizedFusedMoEMethod()).__name__}

method, layer = build()
out = method.apply(layer, StandardDispatchOutput(x, None, topk)).hidden_states
ref = moe_forward_native(layer, x, topk, layer.moe_runner_config)
result["kit"] = [method._kit_reason, (out - ref).abs().max().item()]

# Rows SGLang masks as padding carry expert id -1: they contribute nothing.
masked = topk._replace(topk_ids=topk.topk_ids.clone())
masked.topk_ids[-2:] = -1
out = method.apply(layer, StandardDispatchOutput(x, None, masked)).hidden_states
result["padding"] = [
    (out[:-2] - ref[:-2]).abs().max().item(), out[-2:].abs().max().item()]

# A call the kit does not take (a pre-quantized input) runs SGLang's own path.
scaled = StandardDispatchOutput(x, torch.ones(T), topk)
out = method.apply(layer, scaled).hidden_states
result["per_call"] = (out - ref).abs().max().item()

for name, kwargs, runs in [
    ("biases", {"with_bias": True}, True),
    ("gelu", {"activation": "gelu"}, True),
    ("ep", {"ep": 2}, True),
    ("scaling", {"routed_scaling_factor": 2.5}, True),
    ("clamped", {"gemm1_alpha": 1.702, "gemm1_clamp_limit": 7.0}, False),
    ("router_on_input", {"apply_router_weight_on_input": True}, False),
]:
    method, layer = build(**kwargs)
    diff = None
    if runs:  # SGLang's native path cannot run the other two on a CPU either
        out = method.apply(layer, StandardDispatchOutput(x, None, topk)).hidden_states
        ref = moe_forward_native(layer, x, topk, layer.moe_runner_config)
        diff = (out - ref).abs().max().item()
    result[name] = [method._kit_reason, diff]

# Quantized experts keep their own method; the FusedMoE.__init__ hook says so.
holder = torch.nn.Module()
holder.quant_method = Fp8MoEMethod(Fp8Config(is_checkpoint_fp8_serialized=True))
note_moe_method(None, holder)
result["init_hooked"] = hasattr(fused_moe_layer.FusedMoE.__init__, "__wrapped__")
print(json.dumps(result))
"""


@pytest.fixture(scope="module")
def declines(tmp_path_factory):
    needs("sglang")
    script = tmp_path_factory.mktemp("sglang-moe-declines") / "declines.py"
    script.write_text(DECLINES)
    env = {**launch_env(KERNELS, cpu=True), "PYTHONPATH": str(SHIMS)}
    run = subprocess.run(
        [str(SGLANG_PYTHON), str(script)],
        env={**os.environ, "SGLANG_USE_CPU_ENGINE": "1", **env},
        cwd=script.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    proof = [m["message"] for m in PROOF_LINE.finditer(run.stderr)]
    return json.loads(run.stdout.strip().splitlines()[-1]), proof


def test_layers_the_kit_cannot_take_run_sglangs_own_moe_with_a_log_line(declines):
    """Each configuration outside the kit's kernel keeps SGLang's path (bit-identical to
    its moe_forward_native) and is named once in the log; the one it covers runs the
    kit's kernel within fp32 rounding, padding rows (id -1) included."""
    result, proof = declines
    assert result["class"] == "PocforgeUnquantizedFusedMoEMethod"
    assert result["kit"][0] is None and result["kit"][1] < 1e-5
    assert result["padding"][0] < 1e-5 and result["padding"][1] == 0.0
    assert result["per_call"] == 0.0
    assert (
        "UnquantizedFusedMoEMethod: a call with a pre-quantized input runs SGLang's own path"
        in proof
    )
    expected = {  # configuration -> (reason logged, difference from SGLang's native)
        "biases": ("expert biases", 0.0),
        "gelu": ("activation gelu", 0.0),
        "ep": ("expert parallelism", 0.0),
        "scaling": ("a routed scaling factor", 0.0),
        "clamped": ("clamped SwiGLU", None),  # None: not run (SGLang's native cannot either)
        "router_on_input": ("router weights applied to the input", None),
    }
    for name, (reason, diff) in expected.items():
        assert result[name] == [reason, diff]
        assert f"fused_moe: SGLang's MoE runs a layer with {reason}" in proof
    assert [m for m in proof if " ran (triton) on " in m] == [
        "fused_moe ran (triton) on (6, 32) torch.float32"
    ]


def test_quantized_experts_are_named_in_the_log(declines):
    """An FP8 (or other quantized) MoE method is not the hooked class: the FusedMoE
    constructor hook is in place and logs that SGLang's own kernel runs those experts."""
    result, proof = declines
    assert result["init_hooked"]
    assert "fused_moe: Fp8MoEMethod (not the unquantized method) runs SGLang's own kernel" in proof
