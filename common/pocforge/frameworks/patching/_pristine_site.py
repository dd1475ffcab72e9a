"""Copied as ``sitecustomize.py`` into a folder put first on ``PYTHONPATH`` by the parity
stage's baseline (:mod:`~pocforge.frameworks.patching.pristine`): the framework modules a
POC patched are imported from the originals its patch apply saved, not the patched files,
so the baseline runs the framework unpatched while the environment stays patched (nothing
to put back if the run is killed). The map beside it (``pocforge_pristine.json``) names
each module's installed file and its saved original; a module keeps its installed
``__file__`` (sibling data files still resolve), only its code comes from the original.

Child processes (a server's engine and workers) inherit ``PYTHONPATH`` and so this too.
Plain standard library only: it runs in the framework's interpreter, before anything.
"""

import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "pocforge_pristine.json")) as f:
    _MAP = json.load(f)["modules"]


class _OriginalLoader(importlib.machinery.SourceFileLoader):
    def __init__(self, fullname, path, original):
        super().__init__(fullname, path)
        self.original = original

    def get_code(self, fullname):  # never the installed file's (patched) bytecode cache
        with open(self.original, "rb") as source:
            return compile(source.read(), self.path, "exec", dont_inherit=True)


class _PristineFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        entry = _MAP.get(fullname, False)
        if entry is False:
            return None
        if entry is None:  # a module the patches added: the unpatched framework has none
            raise ModuleNotFoundError(
                f"No module named {fullname!r} (added by a patch)", name=fullname
            )
        loader = _OriginalLoader(fullname, entry["installed"], entry["original"])
        package = [os.path.dirname(entry["installed"])] if entry["package"] else None
        return importlib.util.spec_from_file_location(
            fullname, entry["installed"], loader=loader, submodule_search_locations=package
        )


sys.meta_path.insert(0, _PristineFinder())
