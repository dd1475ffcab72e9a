"""DeepSpeed ZeRO-2 and ZeRO-3 train the tiny model on 2 CPU processes (gloo): the loss goes
down and the benchmark summary is valid against its schema. The runs are the session's
(``zero_runs`` in ``tests/conftest.py``), which the FLOPs test reads too."""

from __future__ import annotations

import json

import pytest

from pocforge.training.summary import TrainingSummary

from ..conftest import ZERO_STAGES, ZERO_STEPS

pytestmark = [
    pytest.mark.integration,
    pytest.mark.budget(300, "the session's DeepSpeed ZeRO-2 and ZeRO-3 runs on 2 gloo ranks"),
]


@pytest.mark.parametrize("stage", ZERO_STAGES)
def test_zero_trains_and_loss_goes_down(zero_runs, stage):
    summary, out = zero_runs[stage]
    losses = [step.loss for step in summary.loss_curve]
    assert summary.status == "completed" and len(losses) == ZERO_STEPS
    assert sum(losses[-2:]) / 2 < sum(losses[:2]) / 2 - 0.05, losses
    assert summary.world_size == 2 and summary.zero_stage == stage
    assert summary.tokens_per_step == 2 * 1 * 32 * 2
    assert summary.tokens_per_s_per_gpu > 0 and summary.mfu is None  # no peak is claimed for a CPU
    # The file on disk is the schema's, not just something pydantic could coerce.
    on_disk = json.loads((out / "summary.json").read_text())
    assert TrainingSummary.model_validate(on_disk).model_dump(mode="json") == on_disk
    assert (out / "ds_config.json").is_file()
