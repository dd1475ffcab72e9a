"""Run store, result schema, provenance, importers, comparisons and verdicts.

``from pocforge.results import RunStore, Run`` is the API the runner writes runs with.
"""

from pocforge.results.base import SchemaError
from pocforge.results.store import Run, RunError, RunStore, Stage

__all__ = ["Run", "RunError", "RunStore", "SchemaError", "Stage"]
