"""Serving predictions move the way a decode roofline must: with concurrency, TP,
precision, and the KV cache's capacity."""

from __future__ import annotations

import pytest

from pocforge.catalog import catalog_entry
from pocforge.plan import Device, Layout, Serving, ServingPoint, Shape
from pocforge.plan.serving import doubling

H100 = Device.of("H100")
LLAMA_70B = Shape(catalog_entry("llama-3.1-70b"))
TP8 = Layout(tp=8)


def predict(layout=TP8, concurrency=1, precision="bf16", isl=1024, osl=1024, **kw):
    model = Serving(LLAMA_70B, layout, H100, "vllm", precision, "bf16", **kw)
    return model.predict(ServingPoint(isl, osl, concurrency))


def test_tpot_grows_with_concurrency():
    """A bigger batch reads more KV cache per step: TPOT never falls as clients are added."""
    tpots = [predict(concurrency=c).tpot_ms for c in (1, 8, 32, 128, 512)]
    assert tpots == sorted(tpots) and tpots[0] < tpots[-1]


def test_throughput_per_gpu_grows_from_1_to_32_clients():
    """Decode is memory-bound at small batches: 32 clients share one read of the weights,
    so output tokens/s per GPU rise (by more than 10×) from concurrency 1 to 32."""
    one, many = predict(concurrency=1), predict(concurrency=32)
    assert many.output_tput_per_gpu > 10 * one.output_tput_per_gpu


def test_tp8_decodes_faster_than_tp4_alone():
    """At concurrency 1 each GPU of TP8 reads half the weights TP4's do: lower TPOT."""
    assert predict(Layout(tp=8)).tpot_ms < predict(Layout(tp=4)).tpot_ms


def test_fp8_weights_decode_faster_than_bf16():
    """The decode step is memory-bound, and fp8 halves the weight bytes it reads."""
    bf16, fp8 = predict(precision="bf16"), predict(precision="fp8")
    assert bf16.bound == "memory"
    assert fp8.tpot_ms < bf16.tpot_ms


def test_405b_bf16_on_one_h100_does_not_fit():
    """810 GB of weights on an 80 GB GPU: fits is False, the reason names GB, and no
    throughput is claimed."""
    p = Serving(Shape(catalog_entry("llama-3.1-405b")), Layout(tp=1), H100).predict(
        ServingPoint(1024, 1024, 1)
    )
    assert not p.fits
    assert p.why and "GB" in p.why and "811.7 GB" in p.why
    assert p.output_tput_per_gpu == 0.0


@pytest.mark.parametrize("isl, osl", [(1024, 1024), (32768, 512), (100_000, 2000)])
@pytest.mark.parametrize("concurrency", [1, 16, 256, 4096])
def test_running_never_exceeds_the_kv_capacity(isl, osl, concurrency):
    """Sequences decoding together are at most the clients and at most the requests whose
    KV caches fit (clients beyond wait, and wait shows in TTFT)."""
    p = predict(concurrency=concurrency, isl=isl, osl=osl)
    assert p.fits
    assert 1 <= p.running <= min(concurrency, p.max_concurrency)


def test_clients_beyond_the_cache_queue_in_ttft():
    """Past the KV capacity throughput stops rising and TTFT absorbs the queue."""
    cap = predict(isl=32768, osl=512).max_concurrency
    at = predict(concurrency=cap, isl=32768, osl=512)
    past = predict(concurrency=4 * cap, isl=32768, osl=512)
    assert past.running == at.running == cap
    assert past.output_tput_per_gpu == pytest.approx(at.output_tput_per_gpu)
    assert past.ttft_ms > 2 * at.ttft_ms


def test_max_batch_caps_running():
    """The engine's max_num_seqs bounds the decode batch below what the cache holds."""
    assert predict(concurrency=512, max_batch=64).running == 64


def test_prediction_states_its_assumptions():
    """Every prediction carries the model's assumptions, in its dict too."""
    p = predict()
    assert p.assumptions and all(isinstance(a, str) and a for a in p.assumptions)
    assert p.as_dict()["assumptions"] == p.assumptions


def test_memory_of_the_prediction_is_the_layouts():
    """The prediction's memory is the layout's (weights an eighth of 141 GB on TP8)."""
    p = predict()
    assert p.memory["weights_gb"] == pytest.approx(141.1 / 8, rel=0.01)
    assert p.memory["kv_bytes_per_token_per_gpu"] == 327_680 / 8


def test_doubling_ladder():
    """1, 2, 4 … up to and including the ceiling; nothing below 1."""
    assert doubling(0) == []
    assert doubling(1) == [1]
    assert doubling(12) == [1, 2, 4, 8, 12]
    assert doubling(16) == [1, 2, 4, 8, 16]
