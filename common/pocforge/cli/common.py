"""Small helpers every verb module shares: clean failures and POC argument resolution."""

from __future__ import annotations

import errno
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


def over_ssh_only(spec, verb: str) -> str | None:
    """Why ``verb`` cannot take a POC whose nodes Slurm owns (None: it can): the cluster
    verbs run one stage at a time over SSH, where a Slurm POC's stages share one allocation."""
    if spec.cluster.scheduler != "slurm":
        return None
    return (
        f"{spec.source_file}: cluster.scheduler: slurm: `pocforge {verb}` runs one stage at a "
        f"time over SSH; a Slurm POC runs its stages in one allocation: `pocforge run "
        f"{spec.name}` (`--stage` for some), or `pocforge launch {spec.name} --print` for its steps"
    )


# What a full, read-only or lost results disk raises: said in one line, never a traceback.
_DISK = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "the disk quota is exhausted",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EIO: "an I/O error on the device",
}


def os_error_line(exc: OSError) -> str:
    """One line for an ``OSError`` a verb did not expect: what, where, and the fix."""
    what = _DISK.get(exc.errno, exc.strerror or type(exc).__name__)
    where = f" writing {exc.filename}" if exc.filename else ""
    fix = ""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES):
        fix = (
            ": free space there, or write elsewhere (POCFORGE_RESULTS=<folder>, or --out);"
            " every file written before stays whole"
        )
    return f"error: {what}{where}{fix}"


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
