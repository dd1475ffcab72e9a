"""Import shims for CUDA-built packages that SGLang's CPU engine imports but never calls.

``install(name)`` makes ``name`` and every ``name.*`` submodule importable. Any attribute is a
placeholder class: it can be imported, read, subclassed and named in annotations, but calling
it or instantiating it raises ``RuntimeError``, so a real use fails loudly instead of
computing something wrong. Only on ``PYTHONPATH`` for CPU launches (pocforge.frameworks.sglang).
"""

import importlib.abc
import importlib.machinery
import sys
import types


class _Meta(type):
    def __getattr__(cls, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _placeholder(f"{cls.__qualname__}.{attr}")

    def __call__(cls, *args, **kwargs):
        if cls.__dict__.get("_pocforge_placeholder"):
            raise RuntimeError(
                f"{cls.__qualname__} is a CPU shim of a CUDA-only package; it cannot be used here"
            )
        return super().__call__(*args, **kwargs)  # a real subclass defined by the importer


def _placeholder(qualname):
    cls = _Meta(qualname.rsplit(".", 1)[-1], (), {"_pocforge_placeholder": True})
    cls.__qualname__ = qualname
    return cls


class _Module(types.ModuleType):
    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        value = _placeholder(f"{self.__name__}.{attr}")
        setattr(self, attr, value)
        return value


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, root):
        self.root = root

    def find_spec(self, fullname, path=None, target=None):
        if fullname.startswith(self.root + "."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _Module(spec.name)
        module.__path__ = []
        module.__pocforge_shim__ = True
        return module

    def exec_module(self, module):
        return None


def install(name, module):
    """Turn the package ``module`` (named ``name``) into a shim and serve its submodules."""
    module.__class__ = _Module
    module.__path__ = []
    module.__pocforge_shim__ = True
    sys.meta_path.insert(0, _Finder(name))
