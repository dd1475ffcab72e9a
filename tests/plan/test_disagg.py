"""Disaggregated prefill/decode sizing meets both SLOs and ships each request's KV cache."""

from __future__ import annotations

import pytest

from pocforge.catalog import catalog_entry
from pocforge.plan import Device, Layout, Serving, Shape, plan_disaggregated

H100 = Device.of("H100")
TP4 = Serving(Shape(catalog_entry("llama-3.1-70b")), Layout(tp=4), H100)


def plan(ttft_ms=2000.0, tpot_ms=50.0, isl=4096, osl=512):
    return plan_disaggregated(TP4, TP4, isl, osl, ttft_ms, tpot_ms)


def test_plan_meets_the_tpot_slo_and_uses_its_instances():
    """A P:D ratio is found; its decode step meets TPOT 50 ms and its GPUs are the
    instances'."""
    p = plan()
    assert p.why is None
    assert p.prefill_instances >= 1 and p.decode_instances >= 1
    assert p.gpus == 4 * (p.prefill_instances + p.decode_instances)
    assert 0 < p.tpot_ms <= 50
    assert p.decode_batch >= 1 and p.output_tput_per_gpu > 0


@pytest.mark.parametrize(
    "isl, osl, ttft_ms, tpot_ms",
    [(4096, 512, 2000, 50), (1024, 1024, 500, 30), (8192, 256, 3000, 40)],
)
def test_plan_meets_the_ttft_slo(isl, osl, ttft_ms, tpot_ms):
    """The chosen ratio's TTFT (queue + prefill + KV transfer) is within the SLO."""
    p = plan(ttft_ms, tpot_ms, isl, osl)
    assert p.why is None
    assert p.ttft_ms <= ttft_ms * (1 + 1e-9)  # at the SLO exactly when the queue is full


def test_kv_sent_per_request_is_the_prompts_cache():
    """A 4096-token prompt of Llama-3.1-70B sends 4096 × 327,680 bytes of bf16 KV cache
    from prefill to decode."""
    p = plan()
    assert p.kv_bytes_per_request == 4096 * 327_680
    assert p.kv_transfer_ms > 0


def test_an_impossible_ttft_says_why():
    """No queue helps when one prefill alone takes longer than the TTFT bound."""
    p = plan(ttft_ms=1)
    assert p.gpus == 0 and p.prefill_instances == p.decode_instances == 0
    assert p.why and "exceeds TTFT 1 ms" in p.why


def test_an_impossible_tpot_says_why():
    """A TPOT bound below one decode step at batch 1 is refused, naming TPOT."""
    p = plan(tpot_ms=1)
    assert p.gpus == 0
    assert p.why and "TPOT 1 ms" in p.why


def test_a_given_split_is_predicted_at_a_point():
    """The spec's own split (``predict_disaggregated``): decode's TPOT is its decode step
    alone; doubling the decode instances at a concurrency that fills one lowers TPOT; the
    KV crossing the NIC takes longer than over NVLink; the GPUs are both pools'."""
    from pocforge.plan import ServingPoint
    from pocforge.plan.disagg import predict_disaggregated

    point = ServingPoint(4096, 512, 64)
    one = predict_disaggregated(TP4, 1, TP4, 1, point, across_nodes=False)
    two = predict_disaggregated(TP4, 1, TP4, 2, point, across_nodes=False)
    far = predict_disaggregated(TP4, 1, TP4, 1, point, across_nodes=True)
    step, _ = TP4.decode_step(64, 4096 + 256)
    assert one.fits and one.tpot_ms == pytest.approx(step * 1e3)
    assert two.tpot_ms < one.tpot_ms and (one.gpus, two.gpus) == (8, 12)
    assert far.transfer_ms > one.transfer_ms > 0
    assert one.kv_bytes_per_request == pytest.approx(
        TP4.shape.request_kv_bytes(4096, 2.0)  # bf16 KV of the prompt
    )
    assert one.ttft_ms >= one.prefill_ms + one.transfer_ms
