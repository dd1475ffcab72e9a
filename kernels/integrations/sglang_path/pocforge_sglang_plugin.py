"""Bootstrap of pocforge's SGLang plugin for an environment without pocforge installed.

This folder goes on SGLang's ``PYTHONPATH``; ``importlib.metadata`` then finds the
``pocforge_kernels`` entry point of group ``sglang.srt.plugins`` in the ``*.dist-info``
folder beside this file, and SGLang calls :func:`register` in each of its processes.
When ``pocforge.kernels`` is not importable, the repository's ``kernels/`` folder is
imported under that name (with an empty ``pocforge`` namespace above it: the kernels
package never imports the rest of pocforge), so the same code runs in both cases.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

KERNELS = Path(__file__).resolve().parents[2]  # <repo>/kernels


def _import_kernels_by_path() -> None:
    if importlib.util.find_spec("pocforge") is None and "pocforge" not in sys.modules:
        namespace = types.ModuleType("pocforge")
        namespace.__path__ = []
        sys.modules["pocforge"] = namespace
    spec = importlib.util.spec_from_file_location(
        "pocforge.kernels", KERNELS / "__init__.py", submodule_search_locations=[str(KERNELS)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["pocforge.kernels"] = module
    spec.loader.exec_module(module)
    sys.modules["pocforge"].kernels = module


def register() -> None:
    """The entry point: load the kit's kernels and run its SGLang hook."""
    try:
        import pocforge.kernels  # noqa: F401  (installed, or already loaded)
    except ImportError:
        _import_kernels_by_path()
    from pocforge.kernels.integrations.sglang_hook import register as register_hook

    register_hook()
