"""A criterion's verdict and each sweep point's: pass, fail or inconclusive, with the
estimate, its interval, the margin to the threshold and the notes that explain it.

``pass`` when the interval lies wholly on the good side of the threshold, ``fail`` when
wholly on the bad side, else ``inconclusive``. Margin = threshold - estimate for ``<``/``<=``
and estimate - threshold for ``>``/``>=``: positive is headroom.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from pocforge.messages import N_, Note, join
from pocforge.metrics import judgeable
from pocforge.stats import Decision, decide, margin

VerdictName = Decision


class PointVerdict(BaseModel):
    point: str | None
    verdict: VerdictName
    estimate: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    method: str = "none"
    n: int = 0
    notes: list[Note] = Field(default_factory=list)

    @property
    def note(self) -> str | None:
        """The notes in English, as the CLI prints them."""
        return join(self.notes)


class CriterionVerdict(BaseModel):
    criterion: str
    metric: str
    op: str
    threshold: float
    confidence: float
    verdict: VerdictName
    estimate: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    margin: float | None = None
    margin_pct: float | None = None
    method: str = "none"
    n: int = 0
    point: str | None = Field(None, description="Sweep point the verdict is reported at.")
    notes: list[Note] = Field(default_factory=list)
    per_point: list[PointVerdict] = Field(default_factory=list)

    @property
    def note(self) -> str | None:
        """The notes in English, as the CLI prints them (the dashboard translates them)."""
        return join(self.notes)


def note(template: str, **args) -> Note:
    return Note(template=template, args=args)


def no_verdict(point: str | None, template: str, **args) -> PointVerdict:
    return PointVerdict(point=point, verdict="inconclusive", notes=[note(template, **args)])


def point_verdict(
    c: Any, value: float, n: int, notes: list[Note] | None = None
) -> CriterionVerdict:
    """``c`` judged on one value without an interval (``method="point"``)."""
    pv = PointVerdict(
        point=None,
        verdict=decide(c.op, c.threshold, value, value),
        estimate=float(value),
        method="point",
        n=n,
        notes=notes or [],
    )
    return criterion_verdict(c, pv)


def criterion_verdict(c: Any, pv: PointVerdict) -> CriterionVerdict:
    m, mp = margin(c.op, c.threshold, pv.estimate)
    return CriterionVerdict(
        criterion=str(c),
        metric=c.metric,
        op=c.op,
        threshold=c.threshold,
        confidence=c.confidence,
        verdict=pv.verdict,
        estimate=pv.estimate,
        ci_low=pv.ci_low,
        ci_high=pv.ci_high,
        margin=m,
        margin_pct=mp,
        method=pv.method,
        n=pv.n,
        point=pv.point,
        notes=list(pv.notes),
    )


def not_judgeable(
    c: Any, section: str, name: str, names: list[str] | None = None
) -> CriterionVerdict | None:
    """Inconclusive, saying why, for a name the registry does not list as judgeable (the
    spec rule refuses those, so only a hand-written or older spec gets here); ``names``: the
    judgeable ones that apply (default: the section's)."""
    names = judgeable(section) if names is None else names
    if name in names:
        return None
    allowed = ", ".join(names)
    template = N_("{name} is not a judgeable {section} metric ({allowed})")
    return criterion_verdict(
        c, no_verdict(None, template, name=name, section=section, allowed=allowed)
    )
