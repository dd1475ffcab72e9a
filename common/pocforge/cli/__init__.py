"""The ``pocforge`` command. Each verb group lives in its own module of this package."""

from __future__ import annotations

import importlib
import os
import sys

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


class _Kit(click.Group):
    """The verbs' last word on an error nothing else caught: one line, no traceback
    (``POCFORGE_DEBUG=1`` shows it). A disk that fills or turns read-only mid-run is the
    common case: what the verb wrote before stays whole (atomic writes, whole records)."""

    def invoke(self, ctx: click.Context):
        from pocforge.cli.common import os_error_line

        try:
            return super().invoke(ctx)
        except OSError as exc:
            if os.environ.get("POCFORGE_DEBUG"):
                raise
            click.echo(os_error_line(exc), err=True)
            sys.exit(1)


@click.group(
    cls=_Kit, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100}
)
@click.version_option(__version__, prog_name="pocforge")
def main() -> None:
    """pocforge: one spec per customer POC, turned into a verified answer.

    \b
    Typical flow:  pocforge validate demo  ->  pocforge show demo  ->  make poc POC=demo
    """


for _name in _VERB_MODULES:
    importlib.import_module(_name).register(main)
