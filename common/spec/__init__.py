"""The POC spec: models, loading with ``include:`` and secrets, rules, errors."""

from pocforge.spec.errors import Problem, SpecError
from pocforge.spec.loader import (
    load_poc,
    load_spec,
    pocs_dir,
    public_dump,
    repo_root,
    resolve_spec_path,
)
from pocforge.spec.models import PocSpec

__all__ = [
    "PocSpec",
    "Problem",
    "SpecError",
    "load_poc",
    "load_spec",
    "pocs_dir",
    "public_dump",
    "repo_root",
    "resolve_spec_path",
]
