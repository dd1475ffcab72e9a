"""Megatron-Core trains the tiny Llama for real through the kit's CPU driver: 2 gloo
processes with TP=2 and with PP=2 (Megatron's 1F1B schedule), against 1 process. The
weights start the same whatever the layout, so the losses must agree to 4 decimals; the
summary is read back from the driver's Megatron-format log by the same parser as a GPU
run's."""

from __future__ import annotations

import gzip
import json

import pytest

from pocforge.frameworks import LaunchContext
from pocforge.frameworks.process import free_port
from pocforge.spec import load_spec
from pocforge.spec.training_schema import TrainingProfile
from pocforge.training.megatron_log import read_log
from pocforge.training.run import run_training
from pocforge.training.summary import TrainingSummary

from ..conftest import REPO

pytestmark = [
    pytest.mark.integration,
    pytest.mark.budget(
        300,
        "Megatron-Core on gloo: up to 2 processes per layout, each importing torch and Megatron",
    ),
]

LAYOUTS = {"tp1": (1, 1, 1), "tp2": (2, 2, 1), "pp2": (2, 1, 2)}  # (world, tp, pp)
PROFILED = [2, 3]  # steps from 0: Megatron's iterations 3 and 4


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Each layout trained once: {name: (summary, output folder)}."""
    found = {}
    for name, (world, tp, pp) in LAYOUTS.items():
        spec = load_spec(REPO / "pocs" / "tiny-llama-fp32-cpu-megatron" / "poc.yaml")
        spec.cluster.gpus_per_node = world
        spec.training.megatron.tp, spec.training.megatron.pp = tp, pp
        if name == "pp2":  # Megatron-LM's profiler flags, on both ranks
            spec.training.profile = TrainingProfile(steps=PROFILED)
        out = tmp_path_factory.mktemp(name)
        ctx = LaunchContext.local(REPO, port=free_port())
        found[name] = (run_training(spec, out, ctx, timeout_s=300), out)
    return found


def losses(summary: TrainingSummary) -> list[float]:
    return [round(step.loss, 4) for step in summary.loss_curve]


def test_tensor_and_pipeline_parallel_losses_equal_one_process(runs):
    one = losses(runs["tp1"][0])
    assert len(one) == 6
    assert losses(runs["tp2"][0]) == one
    assert losses(runs["pp2"][0]) == one
    assert one[-1] < one[0] - 0.1, one  # the optimizer works: the loss goes down


def test_summary_is_a_training_result_with_the_layout(runs):
    summary, out = runs["tp2"]
    assert summary.status == "completed" and summary.framework == "megatron"
    assert summary.parallel["tp"] == 2 and summary.parallel["dp"] == 1
    assert summary.framework_version == "megatron-core 0.16.1"
    assert summary.tokens_per_step == 2 * 2 * 1 * 64  # micro × micro-batches × dp × seq
    assert summary.tokens_per_s_per_gpu > 0 and summary.tflops_per_gpu > 0
    assert summary.mfu is None  # no peak is claimed for a CPU
    assert summary.reported["tflops_per_gpu"] > 0  # Megatron's own figure, kept beside ours
    on_disk = json.loads((out / "summary.json").read_text())
    assert TrainingSummary.model_validate(on_disk).model_dump(mode="json") == on_disk


def test_log_is_megatrons_format_from_the_last_rank(runs):
    _, out = runs["pp2"]
    log = read_log(out / "train.log")
    assert [r.iteration for r in log.iterations] == [1, 2, 3, 4, 5, 6]
    assert {r.global_batch_size for r in log.iterations} == {4}
    assert all(r.lm_loss and r.grad_norm for r in log.iterations)


def test_megatrons_profiler_flags_record_the_chosen_steps_on_every_rank(runs):
    """``--profile --use-pytorch-profiler --profile-step-start 3 --profile-step-end 5`` on
    Megatron's schedule: each rank's trace holds exactly its iterations 3 and 4 (steps 2
    and 3 from 0) and Megatron-Core's layers; the table names the operations; the loss
    is the same as unprofiled and the profiled iterations are left out of the rates."""
    summary, out = runs["pp2"]
    command = (out / "train.log").read_text().splitlines()[0]
    assert "--profile --use-pytorch-profiler --profile-step-start 3 --profile-step-end 5" in command
    for rank in (0, 1):
        trace = json.loads(
            gzip.decompress((out / "profile" / f"rank{rank}.pt.trace.json.gz").read_bytes())
        )
        steps = {
            e["name"] for e in trace["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")
        }
        assert steps == {"ProfilerStep#3", "ProfilerStep#4"}, steps
        assert any(e.get("name", "").startswith("aten::") for e in trace["traceEvents"])
        table = (out / "profile" / f"rank{rank}.profiler_out.txt").read_text()
        assert "Self CPU" in table and "aten::" in table
    assert losses(summary) == losses(runs["tp1"][0])
    log = read_log(out / "train.log")
    kept = [r.elapsed_ms for r in log.iterations if r.iteration > 1 and r.iteration not in (3, 4)]
    assert summary.reported["elapsed_ms"] == pytest.approx(sum(kept) / len(kept))
