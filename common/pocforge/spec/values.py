"""Value types more than one spec module uses."""

from __future__ import annotations

# A passthrough engine argument: a flag's value, a bare flag (True), ``--no-<flag>`` (False),
# a repeated flag (a list), or left out (None).
EngineArg = str | int | float | bool | list[str | int | float] | None
