"""Shared helpers for the cluster tests: load the playbooks' own Python plugins by path."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "collectives"


def _load(relpath: str, name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "playbooks" / relpath)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def nccl_tests():
    return _load("roles/collectives/filter_plugins/nccl_tests.py", "pocforge_nccl_tests")


@pytest.fixture(scope="session")
def check_plugin():
    return _load("action_plugins/pocforge_check.py", "pocforge_check_plugin")
