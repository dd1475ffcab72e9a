"""Where things are: the kit's own files, and the workspace a POC engineer works in.

Two roots, found once here and nowhere else:

- the **kit root** holds what ships with the kit but is not Python: ``playbooks/``,
  ``requirements/``, ``kernels/`` (the kernels distribution a node installs), the kit's CPU
  environments ``.venv`` and ``.venv-sglang``. From a checkout it is the folder above
  ``common/``; an installed kit names it with ``POCFORGE_KIT_ROOT``.
- the **workspace** holds ``pocs/`` and ``results/``: the working directory or the nearest
  parent with a ``pocs/`` folder (so commands work from inside a POC's folder), else the
  working directory. ``POCFORGE_RESULTS`` moves the results.
"""

from __future__ import annotations

import os
from pathlib import Path

KIT_ROOT_ENV = "POCFORGE_KIT_ROOT"
RESULTS_ENV = "POCFORGE_RESULTS"
PLAYBOOKS_ENV = "POCFORGE_PLAYBOOKS"

# common/pocforge/paths.py -> the checkout (an editable install or a plain clone).
_CHECKOUT = Path(__file__).resolve().parents[2]


class KitRootError(RuntimeError):
    """The kit's non-Python files cannot be found (an installed kit without a root)."""


def _is_kit_root(folder: Path) -> bool:
    return (folder / "playbooks").is_dir() and (folder / "kernels").is_dir()


def kit_root() -> Path:
    """The folder holding the kit's ``playbooks/``, ``requirements/`` and ``kernels/``."""
    env = os.environ.get(KIT_ROOT_ENV)
    if env:
        root = Path(env).expanduser().resolve()
        if not _is_kit_root(root):
            raise KitRootError(
                f"{KIT_ROOT_ENV}={env}: no playbooks/ and kernels/ there; point it at a "
                "pocforge checkout or release folder"
            )
        return root
    if _is_kit_root(_CHECKOUT):
        return _CHECKOUT
    raise KitRootError(
        f"pocforge is installed without its playbooks and kernels; set {KIT_ROOT_ENV} to "
        "a pocforge checkout or release folder"
    )


def workspace_root() -> Path:
    """The folder holding ``pocs/`` and ``results/``: the working directory or a parent."""
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if (folder / "pocs").is_dir():
            return folder
    return here


def pocs_dir() -> Path:
    return workspace_root() / "pocs"


def results_root() -> Path:
    """Where runs land: ``POCFORGE_RESULTS``, else the workspace's ``results/``."""
    env = os.environ.get(RESULTS_ENV)
    return Path(env).expanduser() if env else workspace_root() / "results"


def playbooks_dir() -> Path:
    """The kit's Ansible ``playbooks/`` (``POCFORGE_PLAYBOOKS`` overrides)."""
    env = os.environ.get(PLAYBOOKS_ENV)
    return Path(env) if env else kit_root() / "playbooks"


def local_kit() -> Path:
    """This machine's kit folder, for its own environments and caches: the kit root, else
    the folder above the installed package."""
    try:
        return kit_root()
    except KitRootError:
        return _CHECKOUT


def extensions_dir(python: str) -> str:
    """Where DeepSpeed's C++ extensions for CPU training are compiled and cached: inside the
    environment of the interpreter that loads them (``<env>/torch_extensions``), which
    ships them: the kit's setup compiles the shared-memory comm op into ``.venv``, the CPU
    nodes' environment is built with it (:mod:`pocforge.rehearse.node_env`)."""
    return str(Path(python).parent.parent / "torch_extensions")


def kit_env_python(name: str) -> Path:
    """The interpreter of one of the kit's own CPU environments (``.venv``, ``.venv-sglang``)."""
    return local_kit() / name / "bin" / "python"
