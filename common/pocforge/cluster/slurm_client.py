"""Slurm's client commands as the kit asks them: bounded in time, answers as words.

``scontrol``, ``squeue`` and ``scancel`` answer a site's controller in seconds; one that
does not (a dead ``munged`` makes every client wait forever) is an error, not a hang.
"""

from __future__ import annotations

import subprocess

CLIENT_TIMEOUT_S = 30
# node states in which Slurm no longer runs steps there (scontrol's State=, '+'-joined)
LOST = ("DOWN", "NOT_RESPONDING", "DRAIN", "FAIL", "POWERED_DOWN")


class SlurmError(RuntimeError):
    """Slurm refused, or did not answer (its own words)."""


def client(*argv: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(
            list(argv), capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        raise SlurmError(f"{argv[0]} did not answer in {CLIENT_TIMEOUT_S} s") from None
    except OSError as exc:
        raise SlurmError(f"{argv[0]}: {exc.strerror or exc} (is Slurm's client here?)") from None


def fields(text: str) -> dict[str, str]:
    """``scontrol show``'s ``Key=Value`` words."""
    return dict(word.split("=", 1) for word in text.split() if "=" in word)


def node_lost(name: str) -> str | None:
    """Why Slurm no longer runs steps on node ``name`` (its state), or None."""
    state = fields(client("scontrol", "show", "node", name).stdout).get("State", "UNKNOWN")
    return state if any(word in state.split("+") for word in LOST) else None
