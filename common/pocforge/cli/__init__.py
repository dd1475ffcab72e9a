"""The ``pocforge`` command. Each verb group lives in its own module of this package."""

from __future__ import annotations

import importlib

import click

from pocforge import __version__

# Modules that add commands to ``main``; each defines ``register(main)``.
_VERB_MODULES = [
    "pocforge.cli.spec",
    "pocforge.cli.plan",
    "pocforge.cli.launch",
    "pocforge.cli.run",
    "pocforge.cli.patch",
    "pocforge.cli.bench",
    "pocforge.cli.train",  # adds `bench train` to the bench group
    "pocforge.cli.kernels",  # adds `bench kernels` and `kernels compile`
    "pocforge.cli.model",
    "pocforge.cli.cluster",
    "pocforge.cli.rehearse",
    "pocforge.cli.results",
    "pocforge.cli.report",
]


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="pocforge")
def main() -> None:
    """pocforge: one spec per customer POC, turned into a verified answer.

    \b
    Typical flow:  pocforge validate demo  ->  pocforge show demo  ->  make poc POC=demo
    """


for _name in _VERB_MODULES:
    importlib.import_module(_name).register(main)
