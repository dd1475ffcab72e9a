"""Spec problems and how they are shown: ``file:LINE: field.path: message``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a spec, located as precisely as we can."""

    file: Path | None
    line: int | None
    path: str  # dotted field path, e.g. "serving.workloads.0.load"; "" for the whole file
    message: str

    def __str__(self) -> str:
        where = display_path(self.file) if self.file else "<spec>"
        if self.line:
            where += f":{self.line}"
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"


class SpecError(Exception):
    """Every problem found in a spec, raised together so the user fixes them in one pass."""

    def __init__(self, problems: list[Problem]):
        self.problems = sorted(problems, key=lambda p: (str(p.file or ""), p.line or 0, p.path))
        super().__init__("\n".join(str(p) for p in self.problems))


def display_path(file: Path) -> str:
    """The path relative to the working directory when possible (what the user typed)."""
    try:
        return str(file.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(file)
