"""Shared test setup. Area-specific fixtures live in each folder's conftest.py."""

from __future__ import annotations

import os
from pathlib import Path

# Kernels run under the Triton interpreter on this CPU machine; it must be set before any
# kernel module is imported, whichever test folder imports one first.
os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def repo() -> Path:
    return REPO
