"""Small helpers every verb module shares: clean failures and POC argument resolution."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NoReturn

import click

from pocforge.paths import pocs_dir
from pocforge.spec import SpecError, resolve_spec_path


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``message`` to stderr and exit with ``code`` (2: the user's input is wrong)."""
    click.echo(message, err=True)
    sys.exit(code)


def pocs_or_paths(targets: tuple[str, ...]) -> list[Path]:
    """Spec files for POC names, folders or files; every POC (template included) when empty."""
    if not targets:
        return sorted(pocs_dir().glob("*/poc.yaml"))
    paths = []
    for target in targets:
        try:
            paths.append(resolve_spec_path(target))
        except SpecError as exc:
            fail(str(exc))
    return paths
