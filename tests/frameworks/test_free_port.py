"""The kit's port pick for servers it starts here: out of the kernel's ephemeral range, so a
framework's own outgoing or ``bind(0)`` sockets cannot take it before the server starts."""

from __future__ import annotations

import socket

import pytest

from pocforge.frameworks import process
from pocforge.frameworks.process import PORT_SPAN, free_port

pytestmark = pytest.mark.process


def bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_the_port_and_the_span_above_it_are_free_and_below_the_ephemeral_range():
    low = process._ephemeral_low()
    for _ in range(20):
        port = free_port()
        assert port >= 10000 and port + PORT_SPAN <= low
        assert all(bindable(port + n) for n in range(PORT_SPAN))


def test_a_taken_port_in_the_span_moves_the_pick(monkeypatch):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        taken = held.getsockname()[1]
        held.listen()
        # every pick lands on a span that holds the taken port, until the fourth try
        picks = iter([taken - 3, taken - 1, taken, 20000])
        monkeypatch.setattr(process.random.Random, "randrange", lambda self, a, b: next(picks))
        monkeypatch.setattr(process, "_ephemeral_low", lambda: 60000)
        assert free_port() == 20000


def test_an_unreadable_range_falls_back_to_linuxs_default(monkeypatch, tmp_path):
    monkeypatch.setattr(process, "EPHEMERAL_RANGE", tmp_path / "missing")
    assert process._ephemeral_low() == 32768
