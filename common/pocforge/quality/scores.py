"""Published accuracy scores (``scores.yaml``) and the criterion a new POC is proposed from
them: the score less its source's own tolerance, on the same task, shots and samples.

A proposal is a suggestion, not a gate: lm-eval's public tasks download their data, which
a POC run never does, so the task needs the customer's local copy (``include:``) before
the criterion can be turned on.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field

SCORES = Path(__file__).with_name("scores.yaml")


class PublishedScore(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str = Field(description="Hugging Face id the score was measured on.")
    task: str
    num_fewshot: int = Field(ge=0)
    limit: int = Field(ge=1)
    values: dict[str, float] = Field(description="lm-eval's `metric,filter` -> score.")
    rtol: float = Field(gt=0, lt=1)
    api: str = "completions"
    source: str


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tasks: dict[str, dict[str, list[str]]]
    scores: list[PublishedScore]


@functools.cache
def _table() -> _Table:
    return _Table.model_validate(yaml.safe_load(SCORES.read_text()))


def published_scores(model_id: str) -> list[PublishedScore]:
    """The scores published for this model (its Hugging Face id, any case)."""
    wanted = model_id.strip().lower()
    return [s for s in _table().scores if s.model.lower() == wanted]


def kit_metric(task: str, key: str) -> str:
    """The name a run gives lm-eval's ``metric,filter``: the task's first filter keeps the
    plain metric name, the others are ``<metric>_<filter>`` (as
    :func:`pocforge.quality.accuracy.parse_output` names them)."""
    metric, filt = key.split(",", 1)
    filters = _table().tasks.get(task, {}).get("filters", [])
    return metric if filters and filters[0] == filt else f"{metric}_{filt}"


class Proposal(BaseModel):
    score: PublishedScore
    key: str  # lm-eval's metric,filter
    threshold: float

    @property
    def criterion(self) -> str:
        return f"accuracy.{self.score.task}.{kit_metric(self.score.task, self.key)} >= {self.threshold}"

    @property
    def task_entry(self) -> dict:
        entry = {
            "name": self.score.task,
            "task": self.score.task,
            "num_fewshot": self.score.num_fewshot,
            "limit": self.score.limit,
            "include": f"tasks/{self.score.task}",
        }
        if self.score.api != "completions":
            entry["api"] = self.score.api
        return entry


def proposals(model_id: str) -> list[Proposal]:
    """One criterion per published task: its first filter's score, less the source's own
    relative tolerance, rounded down to 3 decimals."""
    out = []
    for score in published_scores(model_id):
        key = next(iter(score.values))
        value = score.values[key]
        threshold = math.floor(value * (1 - score.rtol) * 1000) / 1000
        out.append(Proposal(score=score, key=key, threshold=threshold))
    return out


def commented_block(found: list[Proposal]) -> str:
    """The proposals as commented YAML for a new ``poc.yaml``."""
    lines = ["", "# Published accuracy for this model (pocforge/quality/scores.yaml):"]
    for p in found:
        s = p.score
        lines.append(
            f"#   {s.task} {s.num_fewshot}-shot, {s.limit} samples: {p.key} {s.values[p.key]} "
            f"(source: {s.source})"
        )
    lines += [
        "# To gate on it, put the task's YAML and its data in tasks/<task>/ (nothing is",
        "# downloaded at run time; pocs/SPEC.md, serving.accuracy), then add under serving:",
        "#   accuracy:",
    ]
    for p in found:
        lines.append(
            f"#     - {yaml.safe_dump(p.task_entry, default_flow_style=True, sort_keys=False).strip()}"
        )
    lines.append("# and under acceptance.criteria:")
    for p in found:
        lines.append(f"#     - {p.criterion}")
    return "\n".join(lines) + "\n"
