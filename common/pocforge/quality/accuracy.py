"""Accuracy tasks: lm-evaluation-harness against the POC's own server.

``python -m lm_eval run --model local-completions`` (or ``local-chat-completions``) with the
server's URL, greedy generation, the task's few-shot count and sample limit, the model's
own tokenizer from its folder, and ``HF_DATASETS_OFFLINE`` / ``HF_HUB_OFFLINE`` set: a task
reads local files (its YAML's ``dataset_path`` / ``data_files``), never the hub. The kit's
own task, ``pocforge_arith``, is written for the run from ``tasks/``.

What lm-eval reports (per metric and filter: the value, its stderr, the samples) is the
result; a server error, a task that cannot load its data or zero effective samples is an
infrastructure failure (``AccuracyError``), never a quality verdict.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml
from pydantic import BaseModel, Field

from pocforge.quality.tasks import arith
from pocforge.spec.gates import AccuracyTask

SCHEMA_VERSION = 1


class AccuracyError(RuntimeError):
    """The task could not be evaluated (infrastructure, not quality); one clear line."""


class MetricScore(BaseModel):
    value: float
    stderr: float | None = Field(description="lm-eval's standard error of the mean, if any.")
    filter: str = Field(description="lm-eval's filter the score is after (e.g. first_number).")


class AccuracyResult(BaseModel):
    kind: str = "pocforge-accuracy"
    schema_version: int = SCHEMA_VERSION
    name: str = Field(description="The spec's name for the task (criteria: accuracy.<name>.*).")
    task: str = Field(description="lm-eval's task name.")
    api: str
    num_fewshot: int
    limit: int | None
    samples: int = Field(description="Samples lm-eval evaluated.")
    metrics: dict[str, MetricScore]
    lm_eval_version: str
    seconds: float
    samples_file: str | None = Field(None, description="lm-eval's per-sample log, in the run.")


def task_arguments(
    task: AccuracyTask, poc_dir: Path | None, out_dir: Path
) -> tuple[str, list[str]]:
    """(lm-eval task name, its ``--include_path`` arguments). The kit's task is written into
    ``out_dir`` with its data, so the run holds what was evaluated."""
    name = task.task or task.name
    if task.include:
        folder = (poc_dir / task.include) if poc_dir else Path(task.include)
        if not folder.is_dir():
            raise AccuracyError(
                f"accuracy task {task.name}: include folder {folder} does not exist"
            )
        return name, ["--include_path", str(folder.resolve())]
    if name == arith.TASK:
        folder = out_dir / "tasks"
        folder.mkdir(parents=True, exist_ok=True)
        data = folder / arith.DATA.name
        data.write_text(arith.DATA.read_text())
        (folder / f"{arith.TASK}.yaml").write_text(
            yaml.safe_dump(arith.task_config(data.resolve()), sort_keys=False)
        )
        return name, ["--include_path", str(folder.resolve())]
    return name, []


def lm_eval_argv(
    task: AccuracyTask,
    base_url: str,
    model: str,
    tokenizer: str,
    name: str,
    include: list[str],
    out_dir: Path,
    python: str = sys.executable,
) -> list[str]:
    chat = task.api == "chat"
    endpoint = "chat/completions" if chat else "completions"
    model_args = ",".join(
        [
            f"model={model}",
            f"base_url={base_url.rstrip('/')}/v1/{endpoint}",
            f"num_concurrent={task.concurrency}",
            "max_retries=2",
            "tokenized_requests=False",
            "tokenizer_backend=huggingface",
            f"tokenizer={tokenizer}",
        ]
    )
    argv = [
        python, "-m", "lm_eval", "run",
        "--model", "local-chat-completions" if chat else "local-completions",
        "--model_args", model_args,
        "--tasks", name,
        "--num_fewshot", str(task.num_fewshot),
        "--gen_kwargs", "temperature=0",
        "--output_path", str(out_dir / "lm_eval"),
        "--log_samples",
        "--seed", "0",
        *include,
    ]  # fmt: skip
    if task.limit:
        argv += ["--limit", str(task.limit)]
    if chat:
        argv.append("--apply_chat_template")
    return argv


def run_task(
    task: AccuracyTask,
    base_url: str,
    model: str,
    tokenizer: str,
    out_dir: Path,
    poc_dir: Path | None = None,
) -> AccuracyResult:
    """Evaluate ``task`` against the server at ``base_url``; ``out_dir`` keeps lm-eval's log,
    its results and samples, and ``result.json``."""
    import time

    out_dir.mkdir(parents=True, exist_ok=True)
    name, include = task_arguments(task, poc_dir, out_dir)
    argv = lm_eval_argv(task, base_url, model, tokenizer, name, include, out_dir)
    env = {
        **os.environ,
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    start = time.monotonic()
    log = out_dir / "lm_eval.log"
    try:
        with log.open("w") as sink:
            done = subprocess.run(
                argv, stdout=sink, stderr=subprocess.STDOUT, env=env, timeout=task.timeout_s
            )
    except subprocess.TimeoutExpired:
        raise AccuracyError(
            f"accuracy task {task.name}: lm-eval did not finish in {task.timeout_s:.0f} s (log {log})"
        ) from None
    seconds = time.monotonic() - start
    if done.returncode != 0:
        raise AccuracyError(
            f"accuracy task {task.name}: lm-eval failed (exit {done.returncode}): "
            f"{_last_error(log)} (log {log})"
        )
    result = parse_output(out_dir / "lm_eval", task, name, seconds)
    (out_dir / "result.json").write_text(result.model_dump_json(indent=2))
    return result


def _last_error(log: Path) -> str:
    lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    errors = [line for line in lines if "Error" in line or "error" in line]
    return (errors or lines or ["no output"])[-1][:300]


def parse_output(folder: Path, task: AccuracyTask, name: str, seconds: float) -> AccuracyResult:
    """lm-eval's ``results_*.json`` (newest) under ``folder`` as an ``AccuracyResult``."""
    found = sorted(folder.rglob("results_*.json"), key=lambda p: p.stat().st_mtime)
    if not found:
        raise AccuracyError(f"accuracy task {task.name}: lm-eval wrote no results under {folder}")
    data = json.loads(found[-1].read_text())
    scores = (data.get("results") or {}).get(name)
    if not scores:
        raise AccuracyError(f"accuracy task {task.name}: lm-eval's results have no task {name!r}")
    metrics: dict[str, MetricScore] = {}
    for key, value in scores.items():
        if "," not in key or "_stderr," in key or not isinstance(value, int | float):
            continue
        metric, filt = key.split(",", 1)
        stderr = scores.get(f"{metric}_stderr,{filt}")
        metrics[metric if metric not in metrics else f"{metric}_{filt}"] = MetricScore(
            value=float(value),
            stderr=float(stderr) if isinstance(stderr, int | float) else None,
            filter=filt,
        )
    counts = (data.get("n-samples") or {}).get(name) or {}
    samples = int(counts.get("effective") or 0)
    if samples == 0 or not metrics:
        raise AccuracyError(
            f"accuracy task {task.name}: no sample was evaluated (effective samples: {samples})"
        )
    sample_files = sorted(folder.rglob(f"samples_{name}_*.jsonl"))
    return AccuracyResult(
        name=task.name,
        task=name,
        api=task.api,
        num_fewshot=task.num_fewshot,
        limit=task.limit,
        samples=samples,
        metrics=metrics,
        lm_eval_version=str(
            data.get("lm_eval_version") or (data.get("versions") or {}).get(name) or "unknown"
        ),
        seconds=seconds,
        samples_file=str(sample_files[-1].relative_to(folder.parent)) if sample_files else None,
    )
