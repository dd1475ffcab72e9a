"""The spec verbs through the installed ``pocforge`` console script, as a user runs them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ..conftest import REPO

# Starts a subprocess (git for provenance, patch, the CLI) or opens a local socket.
pytestmark = pytest.mark.process

POCFORGE = str(Path(sys.executable).parent / "pocforge")


def run(*args: str, cwd: Path = REPO, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [POCFORGE, *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=180
    )


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A copy of pocs/ to scaffold into, so tests never touch the checkout."""
    shutil.copytree(REPO / "pocs", tmp_path / "pocs")
    return tmp_path


def test_validate_all_pocs():
    result = run("validate", "--no-framework-check")
    assert result.returncode == 0, result.stderr
    assert "ok  demo" in result.stdout and "ok  deepseek-v3-fp8-mi355x-sglang" in result.stdout


# vLLM's, SGLang's and Megatron's parsers, each a process importing its framework: 22 s here
@pytest.mark.integration
def test_frameworks_own_parsers_pass_every_example_poc_and_catch_an_engine_arg_typo(tmp_path):
    """One validate of every example POC and of a POC with a typo in engine_args, which our
    schema passes through (a passthrough) but vLLM's parser rejects: the examples are ok,
    the typo is named, and the exit status is 2."""
    bad = tmp_path / "typo" / "poc.yaml"
    bad.parent.mkdir()
    text = (REPO / "pocs" / "demo" / "poc.yaml").read_text().replace("name: demo", "name: typo")
    bad.write_text(text.replace("max-num-seqs: 16", "max-num-seqz: 16"))
    examples = sorted(p.parent.name for p in (REPO / "pocs").glob("[!_]*/poc.yaml"))
    result = run("validate", *examples, str(bad))
    assert "vllm arguments not checked" not in result.stderr  # vLLM is installed here
    assert result.returncode == 2, result.stdout + result.stderr
    assert [line.split()[1] for line in result.stdout.splitlines()] == examples, result.stderr
    assert (
        f"{bad}: serving node 0 (server): vLLM rejects the arguments: unrecognized arguments: --max-num-seqz"
        in result.stderr
    )
    assert "1 spec(s) with problems" in result.stderr


def test_validate_bad_spec_exits_2_with_located_problems(tmp_path):
    bad = tmp_path / "bad" / "poc.yaml"
    bad.parent.mkdir()
    text = (REPO / "pocs" / "demo" / "poc.yaml").read_text().replace("name: demo", "name: bad")
    bad.write_text(
        text.replace("framework: vllm", "framework: vlm").replace("  nodes: 1", "  nodez: 1")
    )
    result = run("validate", str(bad))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if "poc.yaml:" in line]
    assert len(lines) == 2, result.stderr
    assert any(
        "cluster.nodez: unknown field 'nodez'; did you mean 'nodes'?" in line for line in lines
    )
    assert any("serving.framework: 'vlm' is not allowed" in line for line in lines)


def test_validate_unknown_poc_suggests(tmp_path):
    result = run("validate", "dmeo")
    assert result.returncode == 2 and "no POC named 'dmeo'; did you mean 'demo'?" in result.stderr


@pytest.mark.parametrize("payload", [b"", b"\x00\xff\xfe", b"{{{{", b"- [\n" * 50])
def test_validate_never_tracebacks(tmp_path, payload):
    bad = tmp_path / "x" / "poc.yaml"
    bad.parent.mkdir()
    bad.write_bytes(payload)
    result = run("validate", str(bad))
    assert (
        result.returncode == 2 and "Traceback" not in result.stderr and "poc.yaml" in result.stderr
    )


def test_show_resolves_and_masks_secrets():
    env = {"PATH": "/usr/bin:/bin", "HF_TOKEN": "canary-5e1d"}
    result = run("show", "llama-3.1-70b-bf16-mi300x-vllm", "--json", env=env)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["serving"]["parallelism"] == {
        "tp": 8,
        "pp": 1,
        "dp": 1,
        "ep": 1,
        "dp_attention": False,
        "all2all_backend": None,
        "deepep_mode": None,
    }
    assert data["model"]["hf_token"] == "**********"
    assert "canary-5e1d" not in result.stdout + result.stderr
    assert "include" not in data


def test_schema_is_json_schema():
    result = run("schema")
    schema = json.loads(result.stdout)
    assert schema["title"] == "PocSpec" and set(schema["required"]) == {"poc", "model", "cluster"}


def test_ls_lists_pocs_with_framework_and_gpus():
    result = run("ls")
    assert result.returncode == 0
    assert "deepseek-v3-fp8-mi355x-sglang" in result.stdout and "2×8 MI355X" in result.stdout
    assert "_template" not in result.stdout


def test_new_from_template(workspace):
    result = run("new", "qwen-72b-bf16-mi325x-vllm", cwd=workspace)
    assert result.returncode == 0, result.stderr
    spec = yaml.safe_load(
        (workspace / "pocs" / "qwen-72b-bf16-mi325x-vllm" / "poc.yaml").read_text()
    )
    assert spec["poc"]["name"] == "qwen-72b-bf16-mi325x-vllm"
    assert (
        run(
            "validate", "--no-framework-check", "qwen-72b-bf16-mi325x-vllm", cwd=workspace
        ).returncode
        == 0
    )


def test_new_from_another_poc_is_an_include(workspace):
    result = run("new", "demo-bf16", "--from", "demo", cwd=workspace)
    assert result.returncode == 0, result.stderr
    text = (workspace / "pocs" / "demo-bf16" / "poc.yaml").read_text()
    assert "include: ../demo/poc.yaml" in text
    shown = json.loads(run("show", "demo-bf16", "--json", cwd=workspace).stdout)
    assert shown["poc"]["name"] == "demo-bf16" and shown["serving"]["framework"] == "vllm"


def test_new_for_a_model_with_a_published_score_proposes_a_criterion_that_validates(workspace):
    """`--model` with a score in the shipped table: the proposal is printed and written
    commented into poc.yaml; uncommented (the task's data given), the POC validates."""
    name = "llama-3-8b-bf16-mi300x-vllm"
    result = run("new", name, "--model", "meta-llama/Meta-Llama-3-8B-Instruct", cwd=workspace)
    assert result.returncode == 0, result.stderr
    assert "proposed criterion: accuracy.gsm8k.exact_match >= 0.718" in result.stdout
    folder = workspace / "pocs" / name
    text = (folder / "poc.yaml").read_text()
    spec = yaml.safe_load(text)
    assert spec["model"]["id"] == "meta-llama/Meta-Llama-3-8B-Instruct"
    assert "facts" not in spec["model"]  # the template's Llama-3.1 facts are not kept
    assert "vllm-project/vllm/blob/" in text  # the score's source
    entry = next(line for line in text.splitlines() if "include: tasks/gsm8k" in line)
    criterion = next(line for line in text.splitlines() if "accuracy.gsm8k." in line)
    spec["serving"]["accuracy"] = [yaml.safe_load(entry.split("- ", 1)[1])]
    spec["acceptance"]["criteria"].append(criterion.split("- ", 1)[1])
    (folder / "tasks" / "gsm8k").mkdir(parents=True)
    (folder / "tasks" / "gsm8k" / "gsm8k.yaml").write_text("task: gsm8k\n")
    (folder / "poc.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    checked = run("validate", "--no-framework-check", name, cwd=workspace)
    assert checked.returncode == 0, checked.stderr


def test_new_for_a_model_without_a_score_proposes_nothing(workspace):
    result = run("new", "acme-7b", "--model", "acme/acme-7b", cwd=workspace)
    assert result.returncode == 0, result.stderr
    assert "proposed criterion" not in result.stdout
    assert "Published accuracy" not in (workspace / "pocs" / "acme-7b" / "poc.yaml").read_text()
    bad = run("new", "acme-8b", "--model", "not a model id", cwd=workspace)
    assert bad.returncode == 2 and "--model 'not a model id' is not a Hugging Face id" in bad.stderr
    assert not (workspace / "pocs" / "acme-8b").exists()


@pytest.mark.parametrize(
    ("name", "error"), [("Bad Name", "must be lowercase"), ("demo", "already exists")]
)
def test_new_refuses_bad_names(workspace, name, error):
    result = run("new", name, cwd=workspace)
    assert result.returncode == 2 and error in result.stderr


@pytest.mark.parametrize("verb", ["ls", "new", "validate", "show", "schema"])
def test_every_verb_has_help(verb):
    result = run(verb, "--help")
    assert result.returncode == 0 and "Usage:" in result.stdout


def test_run_stage_choices_match_the_runner():
    """`pocforge run --stage` lists its choices without importing the runner (light
    --help); they must be the runner's stages."""
    from pocforge.cli.run import STAGE_NAMES
    from pocforge.runner import CLUSTER_STAGES, LOCAL_STAGES

    assert set(STAGE_NAMES) == set(CLUSTER_STAGES) | set(LOCAL_STAGES)
    order = [s for s in STAGE_NAMES if s in CLUSTER_STAGES]
    assert order == list(CLUSTER_STAGES)  # the runner's order, which --help shows
    assert [s for s in STAGE_NAMES if s in LOCAL_STAGES] == list(LOCAL_STAGES)


@pytest.mark.parametrize(
    ("poc", "shown", "hidden"),
    [
        ("llama-3.1-8b-bf16-mi300x-megatron", "megatron", {"zero_stage", "offload", "ds_config"}),
        ("llama-3-8b-bf16-mi300x-deepspeed", "zero_stage", {"megatron"}),
    ],
)
def test_show_lists_only_the_training_frameworks_fields(poc, shown, hidden):
    """A Megatron spec is not shown a ZeRO stage it does not have (nor DeepSpeed a
    megatron block)."""
    from click.testing import CliRunner

    from pocforge.cli.spec import show_cmd

    result = CliRunner().invoke(show_cmd, [poc, "--json"])
    assert result.exit_code == 0, result.output
    training = json.loads(result.output)["training"]
    assert shown in training and not hidden & set(training)
