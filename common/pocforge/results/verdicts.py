"""The spec's acceptance criteria judged on a run: pass, fail or inconclusive, with margin.

Each section's criteria are judged where their results are understood: serving at every
sweep point and reported at the workload's operating point
(:mod:`~pocforge.results.serving_verdicts`), the other stages in
:mod:`~pocforge.results.stage_verdicts`; a verdict's shape is
:mod:`~pocforge.results.verdict_schema`.
"""

from __future__ import annotations

from typing import Any, Literal

from pocforge.messages import N_
from pocforge.results.serving_verdicts import judge_serving
from pocforge.results.stage_verdicts import (
    accuracy_verdict,
    collectives_verdict,
    ep_alltoall_verdict,
    kernels_verdict,
    parity_verdict,
    training_verdict,
)
from pocforge.results.verdict_schema import CriterionVerdict, criterion_verdict, no_verdict


def criteria_of(spec: dict[str, Any] | None) -> list[Any]:
    from pocforge.spec.acceptance_schema import Criterion

    raw = ((spec or {}).get("acceptance") or {}).get("criteria") or []
    return [Criterion.model_validate(c) for c in raw]


def judge_run(run: Any, criteria: list[Any] | None = None) -> list[CriterionVerdict]:
    """Judge ``criteria`` (default: the run's spec's) on a run's stored results."""
    from pocforge.results.run_reader import RunData
    from pocforge.spec.criteria_rules import EP_PHASES

    data = RunData.load(run)
    criteria = criteria_of(run.manifest.spec) if criteria is None else criteria
    serving = [c for c in criteria if c.parts[0] == "serving"]
    judged = dict(zip([id(c) for c in serving], judge_serving(serving, data.serving), strict=True))
    out = []
    for c in criteria:
        section = c.parts[0]
        if section == "serving":
            out.append(judged[id(c)])
        elif section == "training":
            out.append(training_verdict(c, data.training))
        elif section == "kernels":
            out.append(kernels_verdict(c, data.kernels))
        elif section == "collectives" and c.parts[1:2] and c.parts[1] in EP_PHASES:
            out.append(ep_alltoall_verdict(c, data.ep_alltoall))
        elif section == "collectives":
            out.append(collectives_verdict(c, data.collectives))
        elif section == "accuracy":
            out.append(accuracy_verdict(c, data.accuracy))
        elif section == "parity":
            out.append(parity_verdict(c, data.parity))
        else:
            out.append(
                criterion_verdict(
                    c, no_verdict(None, N_("unknown section {section}"), section=section)
                )
            )
    return out


def overall(verdicts: list[CriterionVerdict]) -> Literal["pass", "fail", "inconclusive", "none"]:
    if not verdicts:
        return "none"
    names = {v.verdict for v in verdicts}
    return "fail" if "fail" in names else "inconclusive" if "inconclusive" in names else "pass"
