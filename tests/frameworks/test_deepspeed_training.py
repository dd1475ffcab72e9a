"""DeepSpeed ZeRO-2 and ZeRO-3 train the tiny model on 2 CPU processes (gloo): the loss goes
down and the benchmark summary is valid against its schema."""

from __future__ import annotations

import json

import pytest
import yaml

from pocforge.frameworks import LaunchContext
from pocforge.frameworks.process import free_port
from pocforge.spec import load_spec
from pocforge.training.run import run_training
from pocforge.training.summary import TrainingSummary

from ..conftest import REPO

pytestmark = [
    pytest.mark.integration,
    pytest.mark.budget(300, "DeepSpeed ZeRO stages on 2 gloo ranks"),
]


def training_spec(tmp_path, model, stage: int):
    spec = {
        "poc": {"name": f"zero{stage}", "customer": "pocforge tests", "owner": "tests"},
        "model": {"id": str(model), "dtype": "float32"},
        "cluster": {"gpu": "cpu", "gpus_per_node": 1},
        "training": {
            "framework": "deepspeed",
            "zero_stage": stage,
            "dtype": "float32",
            "world_size": 2,
            "micro_batch": 2,
            "seq_len": 32,
            "steps": 8,
            "warmup_steps": 2,
            "lr": 3e-3,
        },
    }
    path = tmp_path / f"zero{stage}" / "poc.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump(spec))
    return load_spec(path)


@pytest.mark.parametrize("stage", [2, 3])
def test_zero_trains_and_loss_goes_down(tmp_path, tiny_llama, stage):
    spec = training_spec(tmp_path, tiny_llama, stage)
    ctx = LaunchContext.local(REPO, port=free_port())
    summary = run_training(spec, tmp_path / "out", ctx, timeout_s=800)

    losses = [step.loss for step in summary.loss_curve]
    assert summary.status == "completed" and len(losses) == 8
    assert sum(losses[-2:]) / 2 < sum(losses[:2]) / 2 - 0.05, losses
    assert summary.world_size == 2 and summary.zero_stage == stage
    assert summary.tokens_per_step == 2 * 1 * 32 * 2
    assert summary.tokens_per_s_per_gpu > 0 and summary.mfu is None  # no peak is claimed for a CPU
    # The file on disk is the schema's, not just something pydantic could coerce.
    on_disk = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert TrainingSummary.model_validate(on_disk).model_dump(mode="json") == on_disk
    assert (tmp_path / "out" / "ds_config.json").is_file()
