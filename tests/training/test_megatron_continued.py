"""Continued pretraining for real: the tiny Llama the kit builds, in Hugging Face format,
is converted by the kit's importer into a Megatron-Core distributed checkpoint, loaded by
the CPU driver at tensor parallelism 2 (Megatron-Core reshards it) and trained on. The
first iteration's loss is the Hugging Face model's own loss on the same batches, and not
what fresh weights give."""

from __future__ import annotations

import shutil

import pytest

from pocforge.frameworks import LaunchContext
from pocforge.frameworks.base import model_path, prepare_model
from pocforge.frameworks.process import free_port
from pocforge.spec import load_spec
from pocforge.training.megatron_driver import mock_batches
from pocforge.training.run import run_training

from ..conftest import REPO

pytestmark = [
    pytest.mark.integration,
    pytest.mark.budget(240, "one conversion and one 4-step Megatron-Core run on 2 gloo processes"),
]

POC = REPO / "pocs" / "tiny-llama-cpt-fp32-cpu-megatron" / "poc.yaml"


@pytest.fixture(scope="module")
def continued(tmp_path_factory):
    """The POC started from a copy of the tiny model (its conversion lands beside the
    copy, not in the checkout's cache): (spec, the copy, the summary, the stage folder)."""
    spec = load_spec(POC)
    prepare_model(spec)
    source = tmp_path_factory.mktemp("hf") / "tiny-llama"
    shutil.copytree(model_path(spec), source)
    spec.training.init.checkpoint = str(source)
    out = tmp_path_factory.mktemp("cpt")
    ctx = LaunchContext.local(REPO, port=free_port())
    return spec, source, run_training(spec, out, ctx, timeout_s=300), out


def first_losses(spec, source) -> tuple[float, float]:
    """The first iteration's mean loss over its micro-batches (the driver's mock batches),
    by Hugging Face's own model: (the checkpoint's weights, fresh weights)."""
    import torch
    import torch.nn.functional as F
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    tokens = len(AutoTokenizer.from_pretrained(source))
    training = spec.training
    torch.manual_seed(0)
    models = (
        AutoModelForCausalLM.from_pretrained(source, torch_dtype=torch.float32),
        AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(source)),
    )
    found = []
    for model in models:
        data = mock_batches(0, tokens, training.seq_len, training.micro_batch, 0)
        losses = []
        with torch.no_grad():
            for _ in range(training.grad_accum):  # dp 1: the micro-batches of one iteration
                batch = next(data)
                logits = model.eval()(batch).logits
                labels = torch.roll(batch, shifts=-1, dims=1)  # the driver's labels
                losses.append(F.cross_entropy(logits.flatten(0, 1), labels.flatten()))
        found.append(float(torch.stack(losses).mean()))
    return found[0], found[1]


def test_the_first_loss_is_the_loaded_models_not_a_fresh_ones(continued):
    spec, source, summary, _ = continued
    loaded, fresh = first_losses(spec, source)
    first = summary.loss_curve[0].loss
    print(f"first loss {first:.6f}; the HF model's {loaded:.6f}; fresh weights' {fresh:.4f}")
    assert first == pytest.approx(loaded, abs=1e-5), (first, loaded, fresh)
    assert abs(first - fresh) > 1e-3, (first, loaded, fresh)
    assert summary.status == "completed" and summary.parallel["tp"] == 2


def test_the_conversion_is_a_megatron_checkpoint_beside_its_source(continued):
    _, source, _, out = continued
    converted = source.parent / "tiny-llama-mcore-float32"
    assert (converted / "latest_checkpointed_iteration.txt").read_text() == "0"
    assert (converted / "iter_0000000" / "metadata.json").is_file()
    assert not source.parent.joinpath("tiny-llama-mcore-float32.partial").exists()
    assert "imported" in (out / "convert.log").read_text()
    command = (out / "train.log").read_text().splitlines()[0]
    assert f"--load {converted} " in command and "--finetune" in command
