"""Disaggregated serving: how many prefill and decode instances meet a TTFT and a TPOT SLO
at the fewest GPUs, and the KV cache each request sends from prefill to decode.

A decode instance runs only decode steps (no prefill interrupts them), so its TPOT is
its step time; it takes the largest batch whose step meets the TPOT SLO. A prefill
instance queues prompts (M/D/1): the highest utilisation whose wait plus prefill plus
the KV transfer meets the TTFT SLO sets its request rate. The P:D ratio balances the two
rates; among small integer ratios the one with the most output tokens/s per GPU wins.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from pocforge.plan.layout import KV_BYTES
from pocforge.plan.serving import Serving, ServingPoint, doubling


class _Rounded:
    """``as_dict()`` of a result dataclass, its floats to 3 decimals."""

    def as_dict(self) -> dict:
        return {k: round(v, 3) if isinstance(v, float) else v for k, v in asdict(self).items()}


@dataclass
class DisaggPlan(_Rounded):
    prefill_instances: int
    decode_instances: int
    gpus: int
    output_tput_per_gpu: float
    ttft_ms: float
    tpot_ms: float
    decode_batch: int
    kv_bytes_per_request: float
    kv_transfer_ms: float
    why: str | None = None


def plan_disaggregated(
    prefill: Serving,
    decode: Serving,
    isl: int,
    osl: int,
    ttft_ms: float,
    tpot_ms: float,
    max_ratio: int = 8,
) -> DisaggPlan:
    """The P:D split (instances of ``prefill`` and ``decode``) for ISL/OSL under the SLOs."""
    kv = prefill.shape.request_kv_bytes(isl, KV_BYTES[prefill.kv_dtype])
    across = prefill.layout.gpus + decode.layout.gpus > prefill.device.gpus_per_node
    transfer = prefill.device.send(kv, across_nodes=across)
    p_time = prefill.prefill_time(isl)
    slack = ttft_ms / 1e3 - p_time - transfer
    empty = DisaggPlan(0, 0, 0, 0.0, (p_time + transfer) * 1e3, 0.0, 0, kv, transfer * 1e3)
    if slack <= 0:
        empty.why = f"one prefill ({p_time * 1e3:.0f} ms) + KV transfer exceeds TTFT {ttft_ms:g} ms"
        return empty
    # M/D/1 wait = P·ρ/(2(1-ρ)) ≤ slack  →  ρ ≤ 2s/(P + 2s)
    rho = min(0.95, 2 * slack / (p_time + 2 * slack))
    p_rate = rho * prefill.layout.attention_groups / p_time  # requests/s per prefill instance
    capacity = decode.memory.requests(isl + osl)
    batch, step = 0, 0.0
    for b in doubling(capacity):
        t, _ = decode.decode_step(b, isl + osl / 2)
        if t * 1e3 > tpot_ms:
            break  # the step only grows with the batch
        batch, step = b, t
    if batch == 0:
        empty.why = (
            f"decode cannot meet TPOT {tpot_ms:g} ms even at batch 1"
            if capacity
            else "the decode instance's KV cache holds no request"
        )
        return empty
    d_rate = batch / (osl * step)  # requests/s per decode instance
    best: DisaggPlan | None = None
    for x in range(1, max_ratio + 1):
        for y in range(1, max_ratio + 1):
            rate = min(x * p_rate, y * d_rate)
            gpus = x * prefill.layout.gpus + y * decode.layout.gpus
            tput = rate * osl / gpus
            if best is None or tput > best.output_tput_per_gpu * (1 + 1e-9):
                # the prefill instances' real utilisation: at most the ρ the SLO allows
                utilisation = rate * p_time / (x * prefill.layout.attention_groups)
                wait = p_time * utilisation / (2 * (1 - utilisation))
                best = DisaggPlan(
                    x,
                    y,
                    gpus,
                    tput,
                    (p_time + wait + transfer) * 1e3,
                    step * 1e3,
                    batch,
                    kv,
                    transfer * 1e3,
                )
    assert best is not None
    return best


# A spec's own split predicted at each sweep point (``pocforge plan`` on a disaggregated POC).
PREDICT_ASSUMPTIONS = (
    "disaggregated: decode instances decode only (TPOT is the decode step); prefill queues "
    "as M/D/1; the prompt's KV crosses once per request; requests spread evenly",
)


@dataclass(frozen=True)
class DisaggPrediction(_Rounded):
    ratio: str  # "P:D", instances
    gpus: int
    fits: bool
    ttft_ms: float
    prefill_ms: float
    transfer_ms: float
    tpot_ms: float
    output_tput_per_gpu: float
    kv_bytes_per_request: float
    why: str | None = None


def predict_disaggregated(
    prefill: Serving,
    prefill_instances: int,
    decode: Serving,
    decode_instances: int,
    point: ServingPoint,
    across_nodes: bool,
) -> DisaggPrediction:
    """A given split at ``point``, for the spec's own pools: ``concurrency`` clients in a
    closed loop; each decode instance holds ``concurrency / D`` sequences (within its KV
    cache and batch limit) and its TPOT is its decode step; prompts queue at each prefill
    instance (M/D/1) at the loop's rate over ``P``; the prompt's KV crosses once (the NIC
    ``across_nodes``, else the scale-up link); TTFT = wait + prefill + transfer."""
    gpus = prefill.layout.gpus * prefill_instances + decode.layout.gpus * decode_instances
    ratio = f"{prefill_instances}:{decode_instances}"
    kv = decode.shape.request_kv_bytes(point.isl, KV_BYTES[decode.kv_dtype])
    longest = point.isl + point.osl
    problems = [
        f"one {role} instance ({model.layout.label()}) holds no request of {longest} tokens"
        for role, model in (("prefill", prefill), ("decode", decode))
        if model.memory.requests(longest) < 1
    ]
    if problems:
        return DisaggPrediction(
            ratio, gpus, False, 0.0, 0.0, 0.0, 0.0, 0.0, kv, "; ".join(problems)
        )
    share = math.ceil(point.concurrency / decode_instances)
    running = max(1, min(share, decode.memory.requests(longest), decode.batch_limit))
    tpot, _ = decode.decode_step(running, point.isl + point.osl / 2)
    service = prefill.prefill_time(point.isl)
    transfer = decode.device.send(kv, across_nodes)
    rho = 0.0
    for _ in range(50):
        wait = service * rho / max(2 * (1 - rho), 0.1)
        ttft = wait + service + transfer
        rate = min(point.concurrency, running * decode_instances) / (ttft + point.osl * tpot)
        new_rho = min(rate / prefill_instances * service / prefill.layout.attention_groups, 0.95)
        if abs(new_rho - rho) < 1e-6:
            break
        rho = 0.5 * rho + 0.5 * new_rho
    queued = point.concurrency - running * decode_instances
    if queued > 0:  # clients beyond what decode holds wait for a running request
        ttft += queued / rate
    return DisaggPrediction(
        ratio=ratio,
        gpus=gpus,
        fits=True,
        ttft_ms=ttft * 1e3,
        prefill_ms=(wait + service) * 1e3,
        transfer_ms=transfer * 1e3,
        tpot_ms=tpot * 1e3,
        output_tput_per_gpu=rate * point.osl / gpus,
        kv_bytes_per_request=kv,
    )
