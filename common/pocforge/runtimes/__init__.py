"""Where a framework runs on a node: a container, a virtual environment, or the kit's own.

A launch plan (:mod:`pocforge.frameworks`) says *what* to run; the runtime says *where*:

- ``container``: ``docker run`` / ``podman run`` of the framework's image with the
  platform's device flags (ROCm: ``/dev/kfd``, ``/dev/dri``, the ``video`` group, seccomp
  and ptrace as AMD documents; CUDA: ``--gpus all``), host network and IPC, and the
  weights, the run folder and the kit's wheels mounted at the same paths as on the node;
- ``venv``: a Python environment on the node, built by bring-up from the kit's
  requirement file for the accelerator, or an interpreter the customer names;
- ``kit``: this machine's ``.venv`` / ``.venv-sglang``, for ``cluster.gpu: cpu`` only.

:func:`plan_nodes` is the one entry: the adapters' launches, in the runtime each
deployment names (or its default), each still checked by the framework's own parser on
its inner arguments.
"""

from __future__ import annotations

from pocforge.runtimes.plan import plan_nodes
from pocforge.runtimes.resolve import ResolvedRuntime, RuntimeSpecError, resolve

__all__ = ["ResolvedRuntime", "RuntimeSpecError", "plan_nodes", "resolve"]
