"""SLOs and verdicts: pass, fail or inconclusive, judged with a confidence interval.

A goodput rate alone says how many requests met a threshold, not whether the system
meets the customer's criterion. Here each SLO names a metric, the statistic it is judged
at and a threshold (``ttft_ms:p99:2000``). The statistic's 95% interval decides:

- per-request metrics (TTFT, TPOT, ITL, E2EL, interactivity): percentile bootstrap over
  the requests; with several repeats a two-level bootstrap (repeats, then requests within
  each) so run-to-run variation widens the interval;
- throughput-like metrics: Student-t interval of the per-repeat values (one repeat: the
  point value is judged and the verdict says there is no interval).

``pass`` when the whole interval is on the good side of the threshold, ``fail`` when it
is wholly on the bad side, ``inconclusive`` when it straddles the threshold or when there
are too few samples for the percentile (fewer than 1/(1-q) requests for pq).
The margin is threshold - estimate for lower-is-better metrics (estimate - threshold for
higher-is-better), so a positive margin is headroom.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from pocforge.bench.run_metrics import DISTRIBUTION_METRICS, SCALAR_METRICS
from pocforge.messages import N_
from pocforge.metrics import STATISTICS, metric
from pocforge.stats import (
    Decision,
    bootstrap_interval,
    decide,
    op_for,
    samples_needed,
    statistic,
    t_interval,
)
from pocforge.stats import margin as headroom

VerdictName = Decision
_SLO_RE = re.compile(r"^([a-z_]+):([a-z0-9.]+):([-+0-9.eE]+)$")


class SLOError(ValueError):
    """A malformed SLO."""


class SLO(BaseModel):
    model_config = ConfigDict(extra="forbid")

    metric: str
    statistic: str
    threshold: float

    def __str__(self) -> str:
        return f"{self.metric}:{self.statistic}:{self.threshold:g}"


def parse_slo(text: str) -> SLO:
    """``metric:statistic:threshold``, e.g. ``ttft_ms:p99:2000`` or ``request_throughput:mean:5``."""
    m = _SLO_RE.match(text.strip())
    if not m:
        raise SLOError(f"SLO {text!r} is not metric:statistic:threshold (e.g. ttft_ms:p99:2000)")
    name, stat, thr = m.group(1), m.group(2), float(m.group(3))
    if name in DISTRIBUTION_METRICS:
        if stat not in STATISTICS:
            raise SLOError(f"SLO {text!r}: statistic must be one of {', '.join(STATISTICS)}")
    elif name in SCALAR_METRICS:
        if stat != "mean":
            raise SLOError(f"SLO {text!r}: {name} is one number per run; use {name}:mean:<value>")
    else:
        known = ", ".join(DISTRIBUTION_METRICS + SCALAR_METRICS)
        raise SLOError(f"SLO {text!r}: unknown metric {name!r}; known: {known}")
    return SLO(metric=name, statistic=stat, threshold=thr)


def _slo(value: object) -> object:
    return parse_slo(value) if isinstance(value, str) else value


# An SLO given as an object or in its text form (the command line's ``--slo``).
SLOSpec = Annotated[SLO, BeforeValidator(_slo)]


class Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    slo: str
    metric: str
    statistic: str
    threshold: float
    better: Literal["lower", "higher"]
    verdict: VerdictName
    estimate: float | None
    ci_low: float | None
    ci_high: float | None
    confidence: float = 0.95
    method: Literal["bootstrap", "hierarchical-bootstrap", "t-interval", "point", "none"]
    margin: float | None
    margin_pct: float | None
    n: int
    note: str | None = None
    # the note as a message (its English template and values), for the dashboard to
    # translate; None when the note is a fixed message itself
    note_template: str | None = None
    note_args: dict[str, str | int | float] = Field(default_factory=dict)


def judge(
    slo: SLO,
    per_repeat_samples: Sequence[np.ndarray] | None = None,
    per_repeat_values: Sequence[float | None] | None = None,
    *,
    resamples: int = 1000,
    seed: int = 0,
) -> Verdict:
    """Judge one SLO at one sweep point.

    ``per_repeat_samples``: per-request samples of the metric, one array per repeat (for
    distribution metrics). ``per_repeat_values``: the metric's value in each repeat (for
    scalar metrics).
    """
    reg = metric("serving", slo.metric)
    better = reg.better if reg else "lower"
    base = {
        "slo": str(slo),
        "metric": slo.metric,
        "statistic": slo.statistic,
        "threshold": slo.threshold,
        "better": better,
    }

    op = op_for(better)

    def margin(est: float) -> tuple[float | None, float | None]:
        return headroom(op, slo.threshold, est)

    if slo.metric in DISTRIBUTION_METRICS:
        groups = [np.asarray(s, dtype=float) for s in (per_repeat_samples or []) if len(s)]
        n = int(sum(g.size for g in groups))
        if n == 0:
            return Verdict(
                **base,
                verdict="inconclusive",
                estimate=None,
                ci_low=None,
                ci_high=None,
                method="none",
                margin=None,
                margin_pct=None,
                n=0,
                note=N_("no successful requests"),
            )
        est = statistic(np.concatenate(groups), slo.statistic)
        mg, mp = margin(est)
        need = samples_needed(slo.statistic)
        if n < need:
            return Verdict(
                **base,
                verdict="inconclusive",
                estimate=est,
                ci_low=None,
                ci_high=None,
                method="none",
                margin=mg,
                margin_pct=mp,
                n=n,
                note=f"{n} samples; {slo.statistic} needs at least {need}",
                note_template=N_("{n} samples; {statistic} needs at least {need}"),
                note_args={"n": n, "statistic": slo.statistic, "need": need},
            )
        rng = np.random.default_rng(seed)
        lo, hi = bootstrap_interval(groups, slo.statistic, resamples, rng)
        method = "bootstrap" if len(groups) == 1 else "hierarchical-bootstrap"
        return Verdict(
            **base,
            verdict=decide(op, slo.threshold, lo, hi),
            estimate=est,
            ci_low=lo,
            ci_high=hi,
            method=method,
            margin=mg,
            margin_pct=mp,
            n=n,
        )

    vals = [float(v) for v in (per_repeat_values or []) if v is not None and np.isfinite(v)]
    if not vals:
        return Verdict(
            **base,
            verdict="inconclusive",
            estimate=None,
            ci_low=None,
            ci_high=None,
            method="none",
            margin=None,
            margin_pct=None,
            n=0,
            note=N_("metric not available"),
        )
    ci = t_interval(vals)
    if ci is None:
        est = vals[0]
        mg, mp = margin(est)
        verdict = decide(op, slo.threshold, est, est)
        return Verdict(
            **base,
            verdict=verdict,
            estimate=est,
            ci_low=None,
            ci_high=None,
            method="point",
            margin=mg,
            margin_pct=mp,
            n=1,
            note=N_("one repeat: no interval; use --repeats >= 2 for one"),
        )
    est, lo, hi = ci
    mg, mp = margin(est)
    return Verdict(
        **base,
        verdict=decide(op, slo.threshold, lo, hi),
        estimate=est,
        ci_low=lo,
        ci_high=hi,
        method="t-interval",
        margin=mg,
        margin_pct=mp,
        n=len(vals),
    )
