"""The kit's ``sitecustomize`` files as a launch carries them (the patch overlay's,
rocprofv3's gate): each source file followed by ``_site_chain.py``, which runs the
``sitecustomize`` it shadows, so two of them on one path both run."""

from __future__ import annotations

from pathlib import Path

CHAIN = Path(__file__).with_name("_site_chain.py")  # appended, never imported here


def sitecustomize(source: Path) -> str:
    """``source`` (a stand-alone module, never imported here) as a launch's sitecustomize.py."""
    return f"{source.read_text().rstrip()}\n\n\n{CHAIN.read_text()}"
