"""What the framework plugins share: which kit ops a process was asked to plug in, and
the proof lines they print so a server log shows what ran inside the server.

A proof line is ``pocforge-kernels: <message> (pid N)`` on stderr, written once per
process and key; the kit's launcher sends the server's stderr to its log file.
"""

from __future__ import annotations

import logging
import os
import sys

from .. import OPS

LOG_PREFIX = "pocforge-kernels:"

_said: set[str] = set()
_log = logging.getLogger("pocforge_kernels.integrations")


def selected(env: str, value: str | None = None) -> list[str]:
    """Kit ops named by the comma list in ``env`` (or ``value``), in order; unknown names raise."""
    raw = os.environ.get(env, "") if value is None else value
    names = [n.strip() for n in raw.split(",") if n.strip()]
    unknown = [n for n in names if n not in OPS]
    if unknown:
        raise ValueError(
            f"{env}: unknown kit op(s) {', '.join(unknown)}; known: {', '.join(sorted(OPS))}"
        )
    return list(dict.fromkeys(names))


def say(message: str, once: str | None = None) -> None:
    """One proof line on stderr (``once``: a key that prints at most once per process)."""
    if once is not None:
        if once in _said:
            return
        _said.add(once)
    if not _log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        _log.addHandler(handler)
        _log.setLevel(logging.INFO)
        _log.propagate = False
    _log.info("%s %s (pid %d)", LOG_PREFIX, message, os.getpid())
