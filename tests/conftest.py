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


class UnitGuardError(AssertionError):
    """A test without the ``process`` or ``integration`` marker started a process or used
    the network."""


def _refuse(what: str):
    def refuse(*args, **kwargs):
        raise UnitGuardError(
            f"a unit test may not {what}: mark it @pytest.mark.process (quick) or "
            "@pytest.mark.integration (real servers, hosts, browsers)"
        )

    return refuse


@pytest.fixture(autouse=True)
def _unit_guard(request, monkeypatch):
    """``make test-unit`` sets POCFORGE_UNIT_GUARD=1: then a test run as a unit test fails
    the moment it starts a process or connects or binds a socket, so the marker stays
    honest. Tests marked ``process`` or ``integration`` are not guarded."""
    if os.environ.get("POCFORGE_UNIT_GUARD") != "1":
        yield
        return
    marks = {m.name for m in request.node.iter_markers()}
    if not marks & {"process", "integration"}:
        import socket
        import subprocess

        monkeypatch.setattr(subprocess.Popen, "_execute_child", _refuse("start a subprocess"))
        monkeypatch.setattr(os, "fork", _refuse("fork"))
        monkeypatch.setattr(os, "posix_spawn", _refuse("spawn a process"))
        monkeypatch.setattr(socket.socket, "connect", _refuse("connect a socket"))
        monkeypatch.setattr(socket.socket, "bind", _refuse("bind a socket"))
    yield
