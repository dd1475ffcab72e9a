"""Shared helpers for the cluster tests: load the playbooks' own Python plugins by path."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "collectives"
PREFLIGHT_DATA = ROOT / "tests" / "data" / "preflight"


def _load(relpath: str, name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "playbooks" / relpath)
    module = importlib.util.module_from_spec(spec)
    # Importing ansible replaces sys.intern with a patch object for the whole process;
    # torch.compile (the kernel tests in the same session) then refuses to trace. Ansible's
    # own code works either way, so the original is put back once the plugin is loaded.
    intern = sys.intern
    try:
        spec.loader.exec_module(module)
    finally:
        sys.intern = intern
    return module


@pytest.fixture(scope="session")
def nccl_tests():
    return _load("roles/collectives/filter_plugins/nccl_tests.py", "pocforge_nccl_tests")


@pytest.fixture(scope="session")
def check_plugin():
    return _load("action_plugins/pocforge_check.py", "pocforge_check_plugin")


@pytest.fixture(scope="session")
def pcie_links():
    return _load("roles/preflight/filter_plugins/pcie_links.py", "pocforge_pcie_links")


@pytest.fixture(scope="session")
def probe_pcie():
    return _load("roles/preflight/files/probe_pcie.py", "pocforge_probe_pcie")


@pytest.fixture(scope="session")
def probe_gpu():
    return _load("roles/gpu_stack/files/probe_gpu.py", "pocforge_probe_gpu")
