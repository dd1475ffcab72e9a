"""What ``check``, ``apply`` and ``revert`` say: one status per patch, and whether any refuses.

A refusal (version mismatch, conflict, framework missing, stale record) means nothing was
changed; ``pocforge patch`` exits 1 on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Status = Literal[
    "applies",  # check: would apply cleanly
    "applied",  # already in the installed files
    "patched",  # apply: applied now
    "reverted",  # revert: the originals are back
    "not-applied",  # revert: nothing recorded
    "version-mismatch",
    "conflict",
    "not-installed",
    "stale",  # recorded state no longer matches the files or the patches
]
REFUSED: frozenset[str] = frozenset({"version-mismatch", "conflict", "not-installed", "stale"})
LABELS: dict[str, str] = {
    "applies": "applies cleanly",
    "applied": "already applied",
    "patched": "applied",
    "reverted": "reverted",
    "not-applied": "nothing to revert",
    "version-mismatch": "refused, version mismatch",
    "conflict": "refused, conflict",
    "not-installed": "refused, framework not installed",
    "stale": "refused, recorded state is stale",
}


@dataclass
class PatchStatus:
    name: str  # "vllm/0001-x.patch", or the framework for lines about no patch in particular
    status: Status
    detail: str = ""

    @property
    def refused(self) -> bool:
        return self.status in REFUSED

    def line(self) -> str:
        label = LABELS[self.status]
        return f"{self.name}: {label}" + (f" ({self.detail})" if self.detail else "")


@dataclass
class Report:
    statuses: list[PatchStatus]
    changed: bool = False

    @property
    def refused(self) -> bool:
        return any(s.refused for s in self.statuses)
