"""Training predictions: MFU in range, recompute and pipeline bubbles cost time, memory
decides what fits."""

from __future__ import annotations

import pytest

from pocforge.catalog import catalog_entry
from pocforge.plan import Device, Layout, Shape, Training, TrainingPoint
from pocforge.plan.training import model_flops_per_token


def predict(model, gpu, layout, seq_len=4096, global_batch=64, framework="megatron", **kw):
    shape = Shape(catalog_entry(model))
    return Training(shape, layout, Device.of(gpu), framework, **kw).predict(
        TrainingPoint(seq_len, global_batch)
    )


@pytest.mark.parametrize(
    "model, gpu, layout, framework, precision",
    [
        ("llama-3-70b", "H100", Layout(tp=8, pp=4, zero=1), "megatron", "bf16"),
        ("llama-3.1-8b", "MI300X", Layout(dp=8, zero=3), "deepspeed", "bf16"),
        ("llama-3.1-8b", "H100", Layout(tp=2, dp=4, zero=1), "megatron", "fp8"),
        ("deepseek-v3", "B200", Layout(tp=2, pp=8, dp=16, ep=32, zero=1), "megatron", "fp8"),
        ("qwen3-30b-a3b", "H100", Layout(dp=8, ep=8, zero=1), "megatron", "bf16"),
    ],
)
def test_mfu_is_a_fraction(model, gpu, layout, framework, precision):
    """MFU is between 0 and 1 and equals the achieved TFLOP/s over the peak."""
    p = predict(model, gpu, layout, global_batch=256, framework=framework, precision=precision)
    assert 0 < p.mfu < 1
    peak = Device.of(gpu).peak_flops(precision) / 1e12
    assert p.mfu == pytest.approx(p.tflops_per_gpu / peak)


def test_throughput_and_flops_agree():
    """TFLOP/s per GPU is tokens/s per GPU times the model FLOPs per token."""
    p = predict("llama-3-70b", "H100", Layout(tp=8, pp=4, zero=1))
    per_token = model_flops_per_token(Shape(catalog_entry("llama-3-70b")), 4096)
    assert p.tflops_per_gpu * 1e12 == pytest.approx(p.tokens_per_s_per_gpu * per_token)


def test_full_recompute_is_slower():
    """Recomputing the forward adds a third to the compute: a longer step, lower MFU."""
    base = Layout(tp=8, pp=4, zero=1)
    none = predict("llama-3-70b", "H100", base)
    full = predict("llama-3-70b", "H100", base.with_(recompute="full"))
    assert full.step_s > none.step_s
    assert full.mfu < none.mfu


def test_pipeline_bubble_with_few_micro_batches():
    """1F1B over pp 4 with 8 micro-batches idles (pp-1)/(m+pp-1) = 3/11 of the step; with
    one stage there is none, and more micro-batches shrink it."""
    few = predict("llama-3-70b", "H100", Layout(tp=8, pp=4, zero=1), global_batch=8)
    many = predict("llama-3-70b", "H100", Layout(tp=8, pp=4, zero=1), global_batch=256)
    flat = predict("llama-3.1-8b", "H100", Layout(tp=8, zero=1), global_batch=8)
    assert few.breakdown["bubble"] == pytest.approx(3 / 11, abs=1e-4)
    assert many.breakdown["bubble"] < few.breakdown["bubble"]
    assert flat.breakdown["bubble"] == 0


def test_interleaved_pipeline_shrinks_the_bubble_and_holds_more_activations():
    """Megatron's interleaved 1F1B with vpp 4: (pp-1)/(vpp·m+pp-1) = 3/35 for pp 4, m 8;
    the first stage holds (1 + (pp-1)/(pp·vpp)) more activations."""
    plain = predict("llama-3-70b", "H100", Layout(tp=8, pp=4, zero=1), global_batch=8)
    interleaved = predict("llama-3-70b", "H100", Layout(tp=8, pp=4, zero=1, vpp=4), global_batch=8)
    assert interleaved.breakdown["bubble"] == pytest.approx(3 / 35, abs=1e-4)
    assert interleaved.step_s < plain.step_s
    assert interleaved.memory["activations_gb"] > plain.memory["activations_gb"]


def test_70b_zero0_on_eight_h100_does_not_fit_and_says_why():
    """DeepSpeed data parallel with ZeRO-0 keeps all 1.4 TB of model states per GPU; ZeRO-3
    cuts them to about an eighth."""
    zero0 = predict(
        "llama-3-70b", "H100", Layout(dp=8, zero=0), global_batch=8, framework="deepspeed"
    )
    zero3 = predict(
        "llama-3-70b", "H100", Layout(dp=8, zero=3), global_batch=8, framework="deepspeed"
    )
    assert not zero0.fits
    assert "GB" in zero0.why and "exceed 80 GB" in zero0.why
    ratio = zero3.memory["model_states_gb"] / zero0.memory["model_states_gb"]
    assert ratio == pytest.approx(1 / 8, rel=0.15)


def test_zero3_gathers_cost_more_than_an_all_reduce():
    """ZeRO-3 gathers the parameters twice and reduce-scatters the gradients: more data
    parallel time than ZeRO-1's one all-reduce."""
    z1 = predict(
        "llama-3.1-8b", "H100", Layout(dp=16, zero=1), global_batch=64, framework="deepspeed"
    )
    z3 = predict(
        "llama-3.1-8b", "H100", Layout(dp=16, zero=3), global_batch=64, framework="deepspeed"
    )
    assert z3.breakdown["dp_s"] > z1.breakdown["dp_s"]


def test_prediction_states_its_assumptions():
    """The training prediction carries its assumptions and every step component."""
    p = predict("llama-3.1-8b", "H100", Layout(tp=8, zero=1))
    assert p.assumptions
    assert set(p.breakdown) == {"compute_s", "bubble", "tp_s", "dp_s", "ep_s", "cp_s"}
