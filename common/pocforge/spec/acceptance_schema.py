"""The spec's `acceptance:` section: the customer's criteria, `metric op threshold`.

Every field has a description; ``pocs/SPEC.md`` is generated from them.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    Field,
)

from pocforge.spec.base import Strict

_CRITERION = re.compile(
    r"^\s*(?P<metric>[A-Za-z0-9_.\-]+)\s*(?P<op><=|>=|<|>)\s*(?P<threshold>[-+0-9.eE]+)\s*$"
)


def _criterion(value: Any) -> Any:
    """``"serving.chat.ttft_ms.p99 <= 2000"`` is shorthand for the mapping form."""
    if isinstance(value, str):
        match = _CRITERION.match(value)
        if not match:
            raise ValueError(
                f"cannot read criterion {value!r}; write it as 'serving.<workload>.<metric>.<statistic> <= <number>'"
            )
        return {"metric": match["metric"], "op": match["op"], "threshold": match["threshold"]}
    return value


POINT = re.compile(r"[crt][0-9.]+")  # a sweep point's id, as the summaries name them


class Criterion(Strict):
    metric: str = Field(
        description="Metric path: `serving.<workload>.<metric>[.<statistic>][.<point>]` (a point such as `c32` judges that sweep point, else the workload's operating point), `training.<metric>`, `kernels.<op>.<metric>`, `collectives.<collective>.<metric>`, `accuracy.<task>.<metric>` (the task's lm-eval metric) or `parity.<metric>`."
    )
    op: Literal["<=", "<", ">=", ">"] = Field(description="Comparator.")
    threshold: float = Field(description="Value the metric is compared with.")
    confidence: float = Field(
        0.95,
        gt=0.5,
        lt=1,
        description="Confidence level of the interval the verdict is judged with.",
    )

    @property
    def parts(self) -> list[str]:
        """The metric path split at dots, keeping ``p99.9`` and a rate point (``r0.5``) whole;
        a serving criterion's point selector stays the last part (see :attr:`point`)."""
        parts: list[str] = []
        for piece in self.metric.split("."):
            joined = parts and (
                (parts[-1] == "p99" and piece == "9")
                or (re.fullmatch(r"[rt]\d+", parts[-1]) and piece.isdigit())
            )
            if joined:
                parts[-1] = f"{parts[-1]}.{piece}"
            else:
                parts.append(piece)
        return parts

    @property
    def point(self) -> str | None:
        """The sweep point a serving criterion is judged at (``….c32``, ``….r4``), if it
        names one; else the workload's operating point."""
        parts = self.parts
        if parts[0] == "serving" and len(parts) >= 4 and POINT.fullmatch(parts[-1]):
            return parts[-1]
        return None

    @property
    def measure(self) -> list[str]:
        """The metric path without its point selector."""
        return self.parts[:-1] if self.point else self.parts

    def __str__(self) -> str:
        return f"{self.metric} {self.op} {self.threshold:g}"


class AcceptanceSpec(Strict):
    criteria: list[Annotated[Criterion, BeforeValidator(_criterion)]] = Field(
        default_factory=list,
        description="What the customer accepts: each judged pass, fail or inconclusive.",
    )
