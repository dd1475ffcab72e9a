"""The GNU ``patch`` driver: find the binary, replay one patch file in a folder, say why it failed.

Only dry runs call it: on a scratch copy of the installed files, or on a release's source
the kit fetched (:mod:`~pocforge.frameworks.patching.against`); the installed
files themselves are written by :mod:`~pocforge.frameworks.patching.backup`, never by
``patch``. GNU patch, not BSD or busybox: the flags and the messages :func:`failure` reads
are GNU's.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

from pocforge.frameworks.patching.files import PatchError, PatchFile

# Words GNU patch puts on the line that explains a failure.
FAILURE_MARKS = ("FAILED", "can't find", "No file to", "malformed", "No such")


@functools.cache
def binary() -> str:
    """The ``patch`` on PATH, if it is GNU patch; a :class:`PatchError` with the fix if not."""
    exe = shutil.which("patch")
    version = ""
    if exe:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, check=False)
        version = out.stdout
    if not exe or not version.startswith("GNU patch"):
        raise PatchError(
            "GNU patch is needed (`apt-get install patch`; `make setup` installs it as root)"
        )
    return exe


def run(
    patch: PatchFile, folder: Path, reverse: bool = False, dry_run: bool = False, fuzz: int = 0
) -> tuple[bool, str]:
    """Replay ``patch`` in ``folder``: (exit status 0, stdout and stderr together).
    ``fuzz``: context lines a hunk may ignore (0 for a patch on its pinned version; a
    release the patch was not written for is also tried with GNU patch's default, 2)."""
    cmd = [
        binary(),
        "-p1",
        "--force",  # never ask; never guess that a patch is reversed
        f"--fuzz={fuzz}",  # a patch pinned to an exact version must match its context exactly
        "--no-backup-if-mismatch",
        "--reject-file=-",
        "-d",
        str(folder),
        "-i",
        str(patch.path),
    ]
    cmd += ["--reverse"] if reverse else []
    cmd += ["--dry-run"] if dry_run else []
    out = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "LC_ALL": "C"},  # the English messages failure() looks for
        timeout=120,
        check=False,
    )
    return out.returncode == 0, out.stdout + out.stderr


def failure(output: str) -> str:
    """The first failing line of GNU patch's output, with the file it was checking."""
    current = ""
    for line in output.splitlines():
        if line.startswith(("checking file ", "patching file ")):
            current = line.split(" ", 2)[2]
        elif any(m in line for m in FAILURE_MARKS):
            return f"{current}: {line.strip()}" if current else line.strip()
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return lines[-1] if lines else "GNU patch failed without a message"
