"""Copied as ``sitecustomize.py`` into a launch's overlay folder, first on its ``PYTHONPATH``
(:mod:`~pocforge.frameworks.patching.on_nodes`): the framework modules a POC's patches change
are imported from their patched text, made on the controller from the release the node runs.

Before anything is imported, each file the patches touch must be the release's as published
(SHA-256), or already patched in place: any other file stops the process, with one line that
names it, so no half-patched framework serves. The launch says once in its log which patches
are applied. A module keeps its installed ``__file__`` (sibling data files still resolve).
Then the ``sitecustomize`` it shadows runs (``_site_chain.py``, appended to this file).

Child processes (a server's engine and workers) inherit ``PYTHONPATH``, and so this.
Plain standard library only: it runs in the framework's interpreter, before anything.
"""

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(_HERE, "pocforge_patched.json")) as _f:
    _PLAN = json.load(_f)
_SAID = "POCFORGE_PATCHES_SAID"  # set once said: the launch's children do not repeat it


def _stop(why):
    sys.stderr.write(
        f"pocforge: the POC's {_PLAN['framework']} patches are not applied, and this process "
        f"stops: {why}\n"
    )
    sys.stderr.flush()
    os._exit(78)  # EX_CONFIG: nothing of the framework has run


def _installed_root():
    """The sys.path entry that holds the framework's package (found, not imported)."""
    for entry in sys.path:
        folder = os.path.abspath(entry or os.curdir)
        if folder != _HERE and os.path.isfile(
            os.path.join(folder, _PLAN["package"], "__init__.py")
        ):
            return folder
    return None


def _digest(path):
    if not os.path.isfile(path):
        return None
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _served():
    """{module: (installed path, patched code file or None where the patches delete it)}."""
    root = _installed_root()
    if root is None:
        _stop(f"no {_PLAN['package']} package on this interpreter's path")
    served = {}
    for module, entry in _PLAN["modules"].items():
        path = os.path.join(root, entry["path"])
        have = _digest(path)
        if have == entry["patched"]:
            continue  # patched in place already: nothing to serve
        if have != entry["released"]:
            _stop(
                f"{path} is not {_PLAN['framework']} {_PLAN['version']}'s as released "
                f"(SHA-256 {(have or 'absent')[:12]}): patches made for the release would "
                "change another file"
            )
        code = entry.get("code")
        served[module] = (path, os.path.join(_HERE, code) if code else None)
    return served


class _PatchedLoader(importlib.machinery.SourceFileLoader):
    def __init__(self, fullname, path, patched):
        super().__init__(fullname, path)
        self.patched = patched

    def get_code(self, fullname):  # never the installed file's bytecode cache
        with open(self.patched, "rb") as source:
            return compile(source.read(), self.path, "exec", dont_inherit=True)


class _PatchedFinder(importlib.abc.MetaPathFinder):
    def __init__(self, served):
        self.served = served

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.served:
            return None
        installed, patched = self.served[fullname]
        if patched is None:  # a module the patches delete
            raise ModuleNotFoundError(f"{fullname} (removed by the POC's patches)")
        package = os.path.basename(installed) == "__init__.py"
        return importlib.util.spec_from_file_location(
            fullname,
            installed,
            loader=_PatchedLoader(fullname, installed, patched),
            submodule_search_locations=[os.path.dirname(installed)] if package else None,
        )


_SERVED = _served()
sys.meta_path.insert(0, _PatchedFinder(_SERVED))
if not os.environ.get(_SAID):
    os.environ[_SAID] = "1"
    files = ", ".join(entry["path"] for entry in _PLAN["modules"].values())
    sys.stderr.write(
        f"pocforge: {_PLAN['framework']} {_PLAN['version']} patches applied: "
        f"{', '.join(_PLAN['patches'])} ({files})\n"
    )
    sys.stderr.flush()
