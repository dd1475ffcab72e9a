"""What a cross-field rule yields: ``(field path, message)``, located in the YAML by the
loader."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from pocforge.spec.schema import PocSpec

Finding = tuple[tuple[str | int, ...], str]
Rule = Callable[[PocSpec], Iterator[Finding]]
