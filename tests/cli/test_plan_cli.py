"""``pocforge plan`` in-process (click's CliRunner): ``plan predict`` prints JSON with the
numbers a script reads, bad input is one line and exit 2, and ``plan POC`` plans every
example POC and writes a self-describing plan file."""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner

from pocforge.catalog import catalog_names, gpu_names
from pocforge.cli import main

from ..conftest import REPO

SERVING = [
    "plan", "predict", "--model", "llama-3.1-70b", "--gpu", "H100", "--tp", "8",
    "--isl", "1024", "--osl", "1024", "--concurrency", "64",
]  # fmt: skip
TRAINING = [
    "plan", "predict", "--kind", "training", "--framework", "megatron", "--seq-len", "4096",
    "--global-batch", "64", "--tp", "8", "--dp", "2", "--gpu", "H100", "--model", "llama-3-70b",
]  # fmt: skip
POINT_KEYS = {"concurrency", "fits", "ttft_ms", "tpot_ms", "output_tput_per_gpu"}


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def refused(result) -> str:
    """The one-line refusal of a bad input: exit 2, no traceback; its text."""
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    return result.output


def pocs_with_work() -> list[str]:
    names = []
    for path in sorted((REPO / "pocs").glob("*/poc.yaml")):
        data = yaml.safe_load(path.read_text())
        if "serving" in data or "training" in data:
            names.append(path.parent.name)
    return names


# --------------------------------------------------------------------------- plan predict
def test_predict_serving_prints_json():
    """The serving prediction's JSON has throughput, latencies, fit and memory on top."""
    result = invoke(*SERVING, "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    for key in ("output_tput_per_gpu", "ttft_ms", "tpot_ms", "fits", "memory"):
        assert key in out, key
    assert out["fits"] is True and out["output_tput_per_gpu"] > 0
    assert out["gpus"] == 8 and out["replicas"] == 1 and out["layout"] == "TP8"
    assert out["memory"]["kv_bytes_per_token_per_gpu"] == 327_680 / 8


def test_predict_serving_splits_clients_over_replicas():
    """--gpus 16 with a TP8 layout is two replicas, each with half the clients."""
    out = json.loads(invoke(*SERVING, "--gpus", "16", "--json").output)
    assert out["replicas"] == 2 and out["gpus"] == 16
    assert out["running"] == 32


def test_predict_serving_table():
    """Without --json the same numbers come as a table."""
    result = invoke(*SERVING)
    assert result.exit_code == 0, result.output
    assert "output_tput_per_gpu" in result.output and "memory.weights_gb" in result.output


def test_predict_training_prints_json():
    """The training prediction's JSON has tokens/s, TFLOP/s and MFU per GPU."""
    result = invoke(*TRAINING, "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    for key in ("tokens_per_s_per_gpu", "tflops_per_gpu", "mfu", "fits", "memory", "breakdown"):
        assert key in out, key
    assert out["gpus"] == 16 and out["global_batch"] == 64
    assert 0 < out["mfu"] < 1


def test_predict_training_gpus_is_the_layouts_or_refused():
    """Training has no replicas: --gpus 32 with TP8 × DP2 either plans DP4 on 32 GPUs or is
    refused; it never labels a 16-GPU prediction as 32 GPUs."""
    result = invoke(*TRAINING, "--gpus", "32", "--json")
    if result.exit_code != 0:
        refused(result)
        return
    out = json.loads(result.output)
    assert out["gpus"] == 32 and out["layout"].startswith("TP8·DP4")


def test_unknown_model_lists_the_catalog():
    """A model that is neither a path nor in the catalog: exit 2, naming every known one."""
    text = refused(invoke("plan", "predict", "--model", "no-such-model", "--gpu", "H100"))
    assert "unknown model 'no-such-model'" in text
    assert all(name in text for name in catalog_names())


def test_unknown_gpu_lists_the_known_ones():
    """An unknown GPU type: exit 2, naming every known one."""
    text = refused(invoke("plan", "predict", "--model", "llama-3.1-70b", "--gpu", "H999"))
    assert "unknown GPU type 'H999'" in text
    assert all(name in text for name in gpu_names())


def test_gpus_not_a_multiple_of_the_layout():
    """--gpus 12 cannot hold whole TP8 replicas."""
    text = refused(invoke(*SERVING, "--gpus", "12"))
    assert "--gpus 12 is not a multiple of the layout's 8 GPUs (TP8)" in text


def test_serving_refuses_a_training_framework():
    text = refused(invoke(*SERVING, "--framework", "megatron"))
    assert "--framework megatron trains" in text


def test_model_from_a_folder_with_config_json(tmp_path):
    """--model a folder holding a Llama config.json sizes the model from it: the same
    prediction as the catalog's Llama-3.1-70B."""
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "num_hidden_layers": 80,
        "hidden_size": 8192,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "intermediate_size": 28672,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "tie_word_embeddings": False,
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    result = invoke(*[str(tmp_path) if a == "llama-3.1-70b" else a for a in SERVING], "--json")
    assert result.exit_code == 0, result.output
    local = json.loads(result.output)
    catalog = json.loads(invoke(*SERVING, "--json").output)
    assert local["memory"] == catalog["memory"]
    assert local["tpot_ms"] == catalog["tpot_ms"]


def test_model_facts_without_sizes_are_refused(tmp_path):
    """A facts file lacking the sizes: exit 2 naming what is missing."""
    facts = tmp_path / "facts.yaml"
    facts.write_text("layers: 32\nheads: 32\n")
    text = refused(invoke("plan", "predict", "--model", str(facts), "--gpu", "H100"))
    assert "hidden" in text and "vocab" in text


# --------------------------------------------------------------------------- plan POC
@pytest.mark.parametrize("poc", pocs_with_work())
def test_plan_every_example_poc(poc, tmp_path):
    """`plan POC --json FILE` exits 0 and writes a pocforge-plan/1 document with a
    prediction for every sweep point and the training run."""
    out = tmp_path / "plan.json"
    result = invoke("plan", poc, "--json", str(out))
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert doc["schema"] == "pocforge-plan/1"
    assert doc["params"] > 0
    data = yaml.safe_load((REPO / "pocs" / poc / "poc.yaml").read_text())
    assert ("serving" in doc) == ("serving" in data)
    assert ("training" in doc) == ("training" in data)
    if "serving" in doc:
        workloads = doc["serving"]["workloads"]
        assert [w["name"] for w in workloads] == [w["name"] for w in data["serving"]["workloads"]]
        for w in workloads:
            assert w["points"]
            for p in w["points"]:
                assert set(p) >= POINT_KEYS
    if "training" in doc:
        p = doc["training"]["prediction"]
        assert {"tokens_per_s_per_gpu", "tflops_per_gpu", "mfu", "fits"} <= set(p)


def test_plan_covers_the_demo_and_a_gpu_poc():
    """The POCs planned above include the CPU demo and at least one GPU cluster."""
    pocs = pocs_with_work()
    assert "demo" in pocs
    specs = [yaml.safe_load((REPO / "pocs" / p / "poc.yaml").read_text()) for p in pocs]
    gpus = {spec["cluster"]["gpu"] for spec in specs}
    assert gpus - {"cpu"}


def test_plan_of_the_70b_poc_predicts_each_concurrency(tmp_path):
    """One prediction per concurrency of the sweep, in order, on the spec's TP8, and a
    best layout with its launch command."""
    out = tmp_path / "nested" / "plan.json"
    result = invoke("plan", "llama-3.1-70b-bf16-mi300x-vllm", "--json", str(out))
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    chat, long_context = doc["serving"]["workloads"]
    assert [p["concurrency"] for p in chat["points"]] == [1, 8, 32, 64, 128]
    assert [p["concurrency"] for p in long_context["points"]] == [1, 4, 16]
    assert all(p["layout"] == "TP8" and p["fits"] for p in chat["points"])
    assert chat["ranked"] and chat["launch"]
    assert "--tensor-parallel-size" in chat["launch"][-1]


def test_plan_gpus_override_changes_the_cluster():
    """--gpus 16 plans the 70B POC over 16 GPUs instead of its cluster's 8."""
    result = invoke("plan", "llama-3.1-70b-bf16-mi300x-vllm", "--gpus", "16")
    assert result.exit_code == 0, result.output
    assert "on 16 × MI300X" in result.output


def test_plan_of_a_missing_poc():
    """A POC that does not exist: exit 2, naming the POCs there are."""
    text = refused(invoke("plan", "no-such-poc"))
    assert "no POC named 'no-such-poc'" in text and "demo" in text


def test_plan_says_which_training_criteria_its_prediction_misses():
    """The 70B Megatron POC asks MFU >= 0.30; the planner predicts less for its layout, and
    says so before any GPU is used (it used to print the MFU and nothing else)."""
    from click.testing import CliRunner

    from pocforge.cli.plan import plan_group

    out = CliRunner().invoke(plan_group, ["llama-3.1-70b-fp8-mi355x-megatron"])
    assert out.exit_code == 0, out.output
    assert "training.mfu >= 0.3: predicted" in out.output and "misses it" in out.output
    small = CliRunner().invoke(plan_group, ["llama-3.1-8b-bf16-mi300x-megatron"])
    assert "training.mfu >= 0.3: predicted" in small.output and "misses" not in small.output
