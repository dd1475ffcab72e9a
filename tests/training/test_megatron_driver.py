"""Megatron-Core trains the tiny Llama for real through the kit's CPU driver: 2 gloo
processes with TP=2 and with PP=2 (Megatron's 1F1B schedule), against 1 process. The
weights start the same whatever the layout, so the losses must agree to 4 decimals; the
summary is read back from the driver's Megatron-format log by the same parser as a GPU
run's."""

from __future__ import annotations

import json

import pytest

from pocforge.frameworks import LaunchContext
from pocforge.frameworks.process import free_port
from pocforge.spec import load_spec
from pocforge.training.megatron_log import read_log
from pocforge.training.run import run_training
from pocforge.training.summary import TrainingSummary

from ..conftest import REPO

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

LAYOUTS = {"tp1": (1, 1, 1), "tp2": (2, 2, 1), "pp2": (2, 1, 2)}  # (world, tp, pp)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Each layout trained once: {name: (summary, output folder)}."""
    found = {}
    for name, (world, tp, pp) in LAYOUTS.items():
        spec = load_spec(REPO / "pocs" / "tiny-llama-fp32-cpu-megatron" / "poc.yaml")
        spec.cluster.gpus_per_node = world
        spec.training.megatron.tp, spec.training.megatron.pp = tp, pp
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
