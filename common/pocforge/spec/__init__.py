"""The POC spec: models, loading with ``include:`` and secrets, rules, errors."""

from pocforge.spec.errors import Problem, SpecError
from pocforge.spec.loader import (
    load_poc,
    load_spec,
    public_dump,
    resolve_spec_path,
)
from pocforge.spec.schema import PocSpec

__all__ = [
    "PocSpec",
    "Problem",
    "SpecError",
    "load_poc",
    "load_spec",
    "public_dump",
    "resolve_spec_path",
]
