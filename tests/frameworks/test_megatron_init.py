"""``training.init``: Megatron starts from a checkpoint. A Hugging Face one is converted
on every node first (Megatron-Bridge's importer on GPU nodes, the kit's on ``cpu``), once;
the trainer loads the converted folder with Megatron-LM's loading flags and the model's own
tokenizer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from pocforge.catalog.model_facts import facts_from_config
from pocforge.frameworks import LaunchContext, node_launcher
from pocforge.frameworks.launch_plan import NodeLaunch
from pocforge.frameworks.megatron import megatron_args, model_args
from pocforge.frameworks.megatron_init import vocab_divisor
from pocforge.runtimes.plan import plan_deployment
from pocforge.spec import SpecError, load_spec
from pocforge.spec.rules import check_rules
from pocforge.spec.training_schema import TrainingInit

from ..conftest import REPO

GPU_POC = "llama-3.1-70b-fp8-mi355x-megatron"  # 2 nodes, tp 8, pp 2


def poc(name: str, **init):
    spec = load_spec(REPO / "pocs" / name / "poc.yaml")
    spec.training.init = TrainingInit(**init)
    return spec


def value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def inner(launch: NodeLaunch) -> list[str]:
    return (launch.runtime or {}).get("inner_argv") or launch.argv


def test_gpu_nodes_convert_with_megatron_bridge_then_load_it():
    spec = poc(GPU_POC)
    launches = plan_deployment(spec, "training", LaunchContext(repo=Path("/nowhere")))
    assert [(one.node_rank, one.role) for one in launches] == [
        (0, "convert"), (0, "trainer"), (1, "convert"), (1, "trainer"),
    ]  # fmt: skip
    folder = "/opt/pocforge/checkpoints/meta-llama--Llama-3.1-70B-mcore-bfloat16"
    convert = inner(launches[0])
    assert convert[1:3] == [
        "/opt/Megatron-Bridge/examples/conversion/convert_checkpoints.py",
        "import",
    ]
    assert value(convert, "--hf-model") == "meta-llama/Llama-3.1-70B"
    assert value(convert, "--megatron-path") == folder
    assert value(convert, "--torch-dtype") == "bfloat16"
    assert launches[0].creates == f"{folder}/latest_checkpointed_iteration.txt"
    assert f"{folder}:{folder}" in launches[0].argv  # written in the container, kept on the node
    trainer = inner(launches[1])
    assert value(trainer, "--load") == folder
    for flag in ("--exit-on-missing-checkpoint", "--no-load-optim", "--no-load-rng", "--finetune"):
        assert flag in trainer
    assert value(trainer, "--tokenizer-type") == "HuggingFaceTokenizer"
    assert value(trainer, "--tokenizer-model") == "meta-llama/Llama-3.1-70B"
    assert "--vocab-size" not in trainer  # the tokenizer's, padded to the checkpoint's
    # 128,256 tokens, tp 8: Megatron's 128 × 8 would pad to 129,024 rows
    assert value(trainer, "--make-vocab-size-divisible-by") == "32"


def test_without_init_nothing_is_converted_or_loaded():
    spec = load_spec(REPO / "pocs" / GPU_POC / "poc.yaml")
    launches = plan_deployment(spec, "training", LaunchContext(repo=Path("/nowhere")))
    assert {one.role for one in launches} == {"trainer"}
    args = megatron_args(spec)
    assert "--load" not in args and value(args, "--tokenizer-type") == "NullTokenizer"


def test_a_megatron_checkpoint_is_loaded_as_it_is():
    spec = poc(GPU_POC, checkpoint="/data/llama70b-cpt/step-2000", format="megatron")
    launches = plan_deployment(spec, "training", LaunchContext(repo=Path("/nowhere")))
    assert {one.role for one in launches} == {"trainer"}
    args = megatron_args(spec)
    assert value(args, "--load") == "/data/llama70b-cpt/step-2000"
    assert value(args, "--tokenizer-model") == "meta-llama/Llama-3.1-70B"


def test_cpu_converts_with_the_kits_importer_beside_the_model():
    spec = load_spec(REPO / "pocs" / "tiny-llama-cpt-fp32-cpu-megatron" / "poc.yaml")
    ctx = LaunchContext(repo=REPO, python="/venv/bin/python")
    convert, trainer = plan_deployment(spec, "training", ctx)
    model = str((REPO / ".artifacts" / "models" / "tiny-llama").resolve())
    assert convert.argv[:4] == [
        "/venv/bin/python",
        "-m",
        "pocforge.training.megatron_import",
        "import",
    ]
    assert value(convert.argv, "--megatron-path") == f"{model}-mcore-float32"
    assert value(trainer.argv, "--load") == f"{model}-mcore-float32"


@pytest.mark.parametrize(
    ("init", "message"),
    [
        ({"checkpoint": "step-2000", "format": "megatron"}, "absolute path"),
    ],
)
def test_validate_refuses_a_megatron_folder_by_a_relative_path(init, message):
    findings = check_rules(poc(GPU_POC, **init))
    assert any(where[:2] == ("training", "init") and message in text for where, text in findings)


def test_deepspeed_is_told_init_is_megatrons():
    spec = load_spec(REPO / "pocs" / "llama-3-8b-bf16-mi300x-deepspeed" / "poc.yaml")
    spec.training.init = TrainingInit()
    found = [text for where, text in check_rules(spec) if where == ("training", "init")]
    assert found and "framework: megatron" in found[0]


def test_the_model_itself_is_not_a_megatron_folder():
    with pytest.raises(ValidationError, match="absolute|path on the nodes"):
        TrainingInit(format="megatron")


@pytest.mark.parametrize(
    ("vocab", "tp", "divisor"),
    [(128256, 1, 128), (128256, 8, 32), (1536, 2, 128), (151936, 4, 32), (32000, 8, 32), (50257, 2, 128)],
)  # fmt: skip
def test_the_vocabulary_pads_to_the_checkpoints_rows(vocab, tp, divisor):
    assert vocab_divisor(vocab, tp) == divisor


def test_norm_epsilon_comes_from_the_config():
    facts = facts_from_config(
        {"num_hidden_layers": 2, "hidden_size": 128, "num_attention_heads": 2,
         "intermediate_size": 256, "vocab_size": 1536, "rms_norm_eps": 1e-6}
    )  # fmt: skip
    assert value(model_args(facts, 64), "--norm-epsilon") == "1e-06"
    assert "--norm-epsilon" not in model_args(facts.model_copy(update={"norm_eps": 1e-5}), 64)


def step(name: str, code: str, creates: str | None = None) -> dict:
    argv = [sys.executable, "-c", code]
    return NodeLaunch("training", "megatron", 0, "node0", name, argv, creates=creates).as_dict()  # type: ignore[arg-type]


def node_runs(tmp_path: Path, *steps: dict) -> subprocess.CompletedProcess:
    """``node_launcher.py run`` on a plan of ``steps``, as a node runs its training launches."""
    plan = tmp_path / "train.launches.json"
    plan.write_text(
        json.dumps({"poc": "poc", "node_rank": 0, "timeout_s": 60, "launches": list(steps)})
    )
    script = Path(node_launcher.__file__)
    return subprocess.run(
        [sys.executable, str(script), "run", str(plan)], capture_output=True, text=True, timeout=120
    )


def test_a_node_runs_its_steps_in_order_and_skips_one_whose_result_is_there(tmp_path):
    done, mark = tmp_path / "converted", tmp_path / "trained"
    convert = step("convert", f"open({str(done)!r}, 'a').write('x')", creates=str(done))
    train = step("trainer", f"open({str(mark)!r}, 'a').write('y')")
    assert node_runs(tmp_path, convert, train).returncode == 0
    again = node_runs(tmp_path, train, convert)  # the plan's order is not the start order
    assert again.returncode == 0 and "is there; skipped" in again.stdout
    assert done.read_text() == "x" and mark.read_text() == "yy"  # converted once, trained twice


def test_a_failed_step_ends_the_run_before_the_trainer(tmp_path):
    mark = tmp_path / "trained"
    convert = step("convert", "raise SystemExit(3)", creates=str(tmp_path / "never"))
    train = step("trainer", f"open({str(mark)!r}, 'a').write('y')")
    assert node_runs(tmp_path, convert, train).returncode == 3
    assert not mark.exists()


def with_training(tmp_path, **training):
    """The 8B Megatron POC (1×8 MI300X, tp 1, micro-batch 2) with ``training`` changed."""
    source = REPO / "pocs" / "llama-3.1-8b-bf16-mi300x-megatron" / "poc.yaml"
    data = yaml.safe_load(source.read_text())
    data["poc"]["name"] = "variant"
    data["training"].pop("grad_accum", None)
    data["training"].update(training)
    (tmp_path / "variant").mkdir()
    (tmp_path / "variant" / "poc.yaml").write_text(yaml.safe_dump(data))
    return load_spec(tmp_path / "variant" / "poc.yaml")


def test_a_global_batch_sets_the_accumulation(tmp_path):
    spec = with_training(tmp_path, global_batch=256)  # 256 / (2 · dp 8)
    assert spec.training.grad_accum == 16
    assert value(megatron_args(spec), "--global-batch-size") == "256"


@pytest.mark.parametrize(
    ("training", "message"),
    [
        ({"global_batch": 100}, r"global_batch 100 is not a multiple of micro_batch · dp = 2 · 8 = 16: set it to 96 or 112"),
        ({"global_batch": 256, "grad_accum": 4}, r"grad_accum 4 and global_batch 256 disagree"),
    ],
)  # fmt: skip
def test_a_global_batch_the_layout_cannot_make_is_refused(tmp_path, training, message):
    with pytest.raises(SpecError, match=message):
        with_training(tmp_path, **training)
