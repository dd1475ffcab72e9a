"""The Megatron adapter: the spec becomes Megatron-LM's arguments (the same for GPU nodes'
``pretrain_gpt.py``, Primus's experiment file and the kit's CPU driver), one ``torchrun``
per node, checked by Megatron's own code."""

from __future__ import annotations

import pytest
import yaml

from pocforge.frameworks import ADAPTERS, LaunchContext
from pocforge.frameworks.megatron import megatron_args, primus_experiment
from pocforge.runtimes import plan_nodes
from pocforge.runtimes.resolve import default_image
from pocforge.spec import load_spec
from pocforge.training.megatron_driver import parse

from ..conftest import REPO


def poc(name: str):
    return load_spec(REPO / "pocs" / name / "poc.yaml")


def value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_llama_70b_arguments_carry_the_layout_and_the_model():
    spec = poc("llama-3.1-70b-fp8-mi355x-megatron")
    args = megatron_args(spec)
    assert value(args, "--tensor-model-parallel-size") == "8"
    assert value(args, "--pipeline-model-parallel-size") == "2"
    assert "--context-parallel-size" not in args  # cp 1: Megatron's default, not passed
    assert value(args, "--num-layers") == "80" and value(args, "--num-query-groups") == "8"
    # dp = 16 / (8·2) = 1, so the global batch is micro-batch × micro-batches.
    assert value(args, "--global-batch-size") == "32"
    assert value(args, "--fp8-format") == "hybrid" and "--bf16" in args
    assert "--sequence-parallel" in args and "--use-distributed-optimizer" in args
    assert value(args, "--transformer-impl") == "transformer_engine"
    assert value(args, "--distributed-backend") == "nccl"


@pytest.mark.parametrize(
    "name", ["llama-3.1-8b-bf16-mi300x-megatron", "llama-3.1-70b-fp8-mi355x-megatron"]
)
def test_llama_3_1_trains_with_its_own_rope(name):
    """Llama 3.1's config.json has rope_theta 500000 and llama3 scaling by 8; Megatron's
    defaults are base 10000 and none. The published Llama 3.1 Megatron recipes pass
    ``--rotary-base 500000 --use-rope-scaling`` and a factor of 8 (sources in
    tests/data/README.md, "launch recipes"); so does the kit, from the model's facts."""
    args = megatron_args(poc(name))
    assert value(args, "--rotary-base") == "500000"
    assert "--use-rope-scaling" in args and value(args, "--rope-scaling-factor") == "8"


def test_a_model_with_megatrons_own_rope_gets_no_rope_flags():
    """The tiny Llama's config has rope_theta 10000 and no scaling: Megatron's defaults."""
    args = megatron_args(poc("tiny-llama-fp32-cpu-megatron"))
    assert "--rotary-base" not in args and "--use-rope-scaling" not in args


def test_the_cpu_driver_builds_rope_as_asked():
    spec = poc("tiny-llama-fp32-cpu-megatron")
    args = parse([*megatron_args(spec), "--rotary-base", "500000", "--use-rope-scaling",
                  "--rope-scaling-factor", "8"])  # fmt: skip
    assert (args.rotary_base, args.use_rope_scaling, args.rope_scaling_factor) == (
        500000,
        True,
        8.0,
    )


def test_gpu_launch_is_torchrun_per_node_with_pretrain_gpt():
    spec = poc("llama-3.1-70b-fp8-mi355x-megatron")
    launches = ADAPTERS["megatron"].plan(spec, LaunchContext(repo=REPO, python="python3"))
    assert [launch.host for launch in launches] == ["198.51.100.41", "198.51.100.42"]
    for rank, launch in enumerate(launches):
        argv = launch.argv
        assert argv[:3] == ["python3", "-m", "torch.distributed.run"]
        assert f"--node_rank={rank}" in argv and "--nnodes=2" in argv
        assert "--master_addr=198.51.100.41" in argv and "--nproc_per_node=8" in argv
        assert "/workspace/Megatron-LM/pretrain_gpt.py" in argv
        assert launch.env["CUDA_DEVICE_MAX_CONNECTIONS"] == "1"
        # No CPU default leaks into the GPU plan.
        assert not any("megatron_driver" in part or part == "gloo" for part in argv)


def test_megatron_lm_is_found_where_the_image_keeps_it():
    """AMD's current training image (rocm/primus) keeps Megatron-LM inside Primus's checkout;
    the 2025 rocm/megatron-lm path would name a file the image does not have. A POC's own
    ``path`` wins, and a venv (no image) keeps the usual place."""
    spec = poc("llama-3.1-8b-bf16-mi300x-megatron")
    assert spec.training.runtime.image == "docker.io/rocm/primus:v26.9"
    assert default_image("megatron", "amd", "gfx942") == spec.training.runtime.image

    def entry_of(spec) -> str:
        (launch,) = plan_nodes(spec, LaunchContext(repo=REPO, python="python"))
        return next(part for part in launch.argv if part.endswith("pretrain_gpt.py"))

    assert entry_of(spec) == "/workspace/Primus/third_party/Megatron-LM/pretrain_gpt.py"
    spec.training.megatron.path = "/opt/Megatron-LM"
    assert entry_of(spec) == "/opt/Megatron-LM/pretrain_gpt.py"
    spec.training.megatron.path = None
    spec.training.runtime = spec.training.runtime.model_copy(update={"kind": "venv"})
    assert entry_of(spec) == "/workspace/Megatron-LM/pretrain_gpt.py"


def test_cpu_launch_runs_the_kits_driver_with_arguments_it_reads():
    spec = poc("tiny-llama-fp32-cpu-megatron")
    (launch,) = ADAPTERS["megatron"].plan(spec, LaunchContext(repo=REPO, python="python3"))
    index = launch.argv.index("pocforge.training.megatron_driver")
    args = parse(launch.argv[index + 1 :])  # the driver's own parser takes every argument
    assert args.tensor_model_parallel_size == 2 and args.distributed_backend == "gloo"
    assert args.global_batch_size == 2 * 2 * 1  # micro 2 × accumulation 2 × dp 1


def test_driver_refuses_an_argument_it_does_not_implement(capsys):
    spec = poc("tiny-llama-fp32-cpu-megatron")
    with pytest.raises(SystemExit) as exited:
        parse([*megatron_args(spec), "--use-distributed-optimizer"])
    assert exited.value.code == 2
    assert "not run by the kit's CPU Megatron driver: --use-distributed-optimizer" in (
        capsys.readouterr().err
    )


def test_primus_experiment_has_the_same_arguments_as_overrides():
    """``entry: primus`` runs Primus's own checkout (its default /workspace/Primus: the
    Megatron-LM path held a file only Primus has), its Megatron-LM from third_party/."""
    spec = poc("llama-3.1-8b-bf16-mi300x-megatron")
    spec.training.megatron.entry = "primus"
    (launch,) = ADAPTERS["megatron"].plan(spec, LaunchContext(repo=REPO, python="python3"))
    assert "/workspace/Primus/examples/megatron/pretrain.py" in launch.argv
    experiment = yaml.safe_load(launch.files["primus-exp.yaml"])
    trainer = experiment["modules"]["pre_trainer"]
    assert trainer["framework"] == "megatron" and trainer["model"] == "llama3.1_8B.yaml"
    overrides = trainer["overrides"]
    assert overrides["tensor_model_parallel_size"] == 1
    assert overrides["global_batch_size"] == 2 * 8 * 8  # micro × micro-batches × dp 8
    assert overrides["use_distributed_optimizer"] is True and overrides["mock_data"] is True
    assert launch.env["PYTHONPATH"] == (
        "/workspace/Primus/third_party/Megatron-LM:/workspace/Primus"
    )
    assert primus_experiment(spec)["exp_name"] == spec.name


@pytest.mark.process
def test_megatron_core_checks_query_groups_against_tp():
    """Megatron-Core's TransformerConfig (Megatron-LM's parser is not on the registry) rejects
    what the kit's rules do not model; the example POCs pass, in the same check (one process
    importing Megatron-Core, 7 s)."""
    ctx = LaunchContext.local(REPO)
    adapter = ADAPTERS["megatron"]
    good = [
        poc(name) for name in ("llama-3.1-8b-bf16-mi300x-megatron", "tiny-llama-fp32-cpu-megatron")
    ]
    bad = poc("llama-3.1-8b-bf16-mi300x-megatron")
    bad.training.megatron.tp = 2
    bad.training.megatron.extra_args = ["--num-query-groups", "3"]
    wrong = adapter.plan(bad, ctx)
    launches = [launch for spec in good for launch in adapter.plan(spec, ctx)]
    (found,) = adapter.check(launches + wrong, ctx)
    assert found[0] in wrong
    assert (
        "num_query_groups (3) must be a multiple or divisor of tensor_model_parallel_size (2)"
        in found[1]
    )


def test_a_rope_scaling_megatron_has_no_flag_for_is_refused():
    """YaRN (Qwen, DeepSeek) is not Llama 3's scaling: trained with the kit's flags the
    model would be another; validate refuses it, naming it."""
    from pocforge.catalog import ModelFacts
    from pocforge.spec.training_rules import megatron_layout_fits

    spec = poc("llama-3.1-8b-bf16-mi300x-megatron")
    facts = ModelFacts(layers=32, hidden=4096, heads=32, kv_heads=8, intermediate=14336,
                       vocab=128256, experts=0, rope_theta=1e6, rope_scaling="yarn",
                       rope_scaling_factor=4.0)  # fmt: skip
    yarn = spec.model_copy(update={"model": spec.model.model_copy(update={"facts": facts})})
    found = [message for _, message in megatron_layout_fits(yarn)]
    assert any("RoPE scaling 'yarn' has no Megatron-LM flag" in m for m in found), found
    assert not any("RoPE" in m for _, m in megatron_layout_fits(spec))


def test_validate_says_megatron_lms_own_flags_went_unchecked():
    """Only Megatron-Core is on the package index: a typo in extra_args passes its model
    checks, so validate names the flags it could not check instead of passing silently."""
    from pocforge.frameworks.checks import _megatron_lm_unchecked

    spec = poc("llama-3.1-8b-bf16-mi300x-megatron")
    typo = spec.training.megatron.model_copy(update={"extra_args": ["--use-rope-scalling"]})
    spec = spec.model_copy(update={"training": spec.training.model_copy(update={"megatron": typo})})
    (note,) = _megatron_lm_unchecked([spec])
    assert "Megatron-LM's own argument parser is not installed here" in note
    assert "training.megatron.extra_args: --use-rope-scalling" in note
    assert _megatron_lm_unchecked([poc("llama-3-8b-bf16-mi300x-deepspeed")]) == []


def test_amd_training_gets_the_recipes_variables_and_the_poc_wins():
    """AMD's Megatron recipe (Primus examples README) sets HSA_NO_SCRATCH_RECLAIM=1 and
    NVTE_CK_USES_BWD_V3=1 everywhere, NVTE_CK_IS_V3_ATOMIC_FP32=1 on MI300X/MI325X only."""
    mi300x = plan_nodes(poc("llama-3.1-8b-bf16-mi300x-megatron"), LaunchContext(repo=REPO))
    env = mi300x[0].runtime["env"]
    assert (env["HSA_NO_SCRATCH_RECLAIM"], env["NVTE_CK_USES_BWD_V3"]) == ("1", "1")
    assert env["NVTE_CK_IS_V3_ATOMIC_FP32"] == "1"
    mi355x = plan_nodes(poc("llama-3.1-70b-fp8-mi355x-megatron"), LaunchContext(repo=REPO))
    assert "NVTE_CK_IS_V3_ATOMIC_FP32" not in mi355x[0].runtime["env"]  # gfx950: not asked
    spec = poc("llama-3.1-8b-bf16-mi300x-megatron")
    mine = spec.training.runtime.model_copy(update={"env": {"HSA_NO_SCRATCH_RECLAIM": "0"}})
    spec = spec.model_copy(update={"training": spec.training.model_copy(update={"runtime": mine})})
    assert (
        plan_nodes(spec, LaunchContext(repo=REPO))[0].runtime["env"]["HSA_NO_SCRATCH_RECLAIM"]
        == "0"
    )
    assert "HSA_NO_SCRATCH_RECLAIM" not in (
        ADAPTERS["megatron"]
        .plan(poc("tiny-llama-fp32-cpu-megatron"), LaunchContext(repo=REPO))[0]
        .env
    )
