"""The run fixtures of tests/results (real benchmark output through the store API)."""

from tests.results.conftest import DATA, build_demo_run, demo_run, store

__all__ = ["DATA", "build_demo_run", "demo_run", "store"]
