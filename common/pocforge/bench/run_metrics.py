"""The serving metrics of one run (a point's repeat) from its per-request records.

Which metrics there are and how each is defined is :mod:`pocforge.metrics`; the
statistics themselves (percentiles, intervals) are :mod:`pocforge.stats`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pocforge.bench.measured import Measured
from pocforge.bench.records import RequestRecord
from pocforge.stats import describe

DISTRIBUTION_METRICS = (
    "ttft_ms",
    "tpot_ms",
    "itl_ms",
    "e2el_ms",
    "interactivity",
    "ttft_first_turn_ms",
    "ttft_later_turns_ms",
)
# Only for workloads whose requests have turns (multi_turn, doc_qa).
TURN_METRICS = ("ttft_first_turn_ms", "ttft_later_turns_ms")
SCALAR_METRICS = (
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    "goodput",
    "output_throughput_per_gpu",
    "error_rate",
)


def samples(records: Sequence[RequestRecord | Measured], metric: str) -> np.ndarray:
    """Per-request samples of a distribution metric over the successful records.

    ``itl_ms`` pools every gap of every request; ``tpot_ms`` and ``interactivity`` skip
    requests with fewer than two output tokens (their TPOT is undefined); the turn metrics
    take the TTFT of turn 0 (nothing cached yet) or of the later turns.
    """
    ok = [r for r in records if r.success]
    if metric == "ttft_ms":
        vals = [r.ttft_ms for r in ok]
    elif metric == "ttft_first_turn_ms":
        vals = [r.ttft_ms for r in ok if r.turn == 0]
    elif metric == "ttft_later_turns_ms":
        vals = [r.ttft_ms for r in ok if r.turn is not None and r.turn > 0]
    elif metric == "e2el_ms":
        vals = [r.e2el_ms for r in ok]
    elif metric == "tpot_ms":
        vals = [r.tpot_ms for r in ok if r.tpot_ms is not None]
    elif metric == "interactivity":
        vals = [1000.0 / r.tpot_ms for r in ok if r.tpot_ms]
    elif metric == "itl_ms":
        vals = [x for r in ok for x in r.itl_ms]
    else:
        raise ValueError(f"{metric!r} is not a per-request metric")
    return np.asarray(vals, dtype=float)


def meets_slos(record: RequestRecord | Measured, thresholds: dict[str, float]) -> bool:
    """vLLM's goodput rule: a request is good if its TTFT, TPOT and E2EL are each within
    the SLO thresholds given for them (a request with one output token has TPOT 0)."""
    if not record.success:
        return False
    values = {
        "ttft_ms": record.ttft_ms,
        "tpot_ms": record.tpot_ms or 0.0,
        "e2el_ms": record.e2el_ms,
    }
    return all(values[m] <= thr for m, thr in thresholds.items() if m in values)


def peak_concurrency(records: Sequence[RequestRecord | Measured]) -> int:
    """Most requests in flight at once, from send and end times (failed ones included)."""
    events: list[tuple[float, int]] = []
    for r in records:
        end = r.sent_s + (r.e2el_ms or 0.0) / 1000.0
        events += [(r.sent_s, 1), (end, -1)]
    events.sort(key=lambda e: (e[0], e[1]))  # an end before a start at the same instant
    cur = peak = 0
    for _, step in events:
        cur += step
        peak = max(peak, cur)
    return peak


def run_metrics(
    records: Sequence[RequestRecord | Measured],
    duration_s: float,
    goodput_thresholds: dict[str, float],
    gpus: int,
) -> dict[str, dict[str, float | None] | float | None]:
    """All serving metrics of one run: distributions described, scalars as numbers."""
    ok = [r for r in records if r.success]
    out: dict[str, dict[str, float | None] | float | None] = {}
    turns = any(r.turn is not None for r in records)
    for m in DISTRIBUTION_METRICS:
        if m in TURN_METRICS and not turns:
            continue
        out[m] = describe(samples(records, m))
    dur = duration_s if duration_s > 0 else float("nan")
    out_tok = sum(r.output_tokens or 0 for r in ok)
    in_tok = sum(r.prompt_tokens or 0 for r in ok)
    out["request_throughput"] = len(ok) / dur
    out["output_throughput"] = out_tok / dur
    out["total_token_throughput"] = (in_tok + out_tok) / dur
    out["goodput"] = (
        sum(meets_slos(r, goodput_thresholds) for r in ok) / dur if goodput_thresholds else None
    )
    out["output_throughput_per_gpu"] = out_tok / dur / gpus if gpus else None
    out["error_rate"] = (len(records) - len(ok)) / len(records) if records else None
    return out
