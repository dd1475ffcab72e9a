"""``pocforge patch check|apply|revert POC``: a POC's framework patches on the installed framework.

Exit codes: 0 ok, 1 refused (version mismatch, conflict, framework missing, stale record:
nothing was changed), 2 bad input (unknown POC, malformed patch file, unusable --python).
"""

from __future__ import annotations

import sys

import click

from pocforge.cli.common import fail
from pocforge.frameworks.patching import FRAMEWORKS, PatchError, Report, apply, check, revert
from pocforge.spec import SpecError, load_poc

_python = click.option(
    "--python",
    "python",
    metavar="PATH",
    help="Interpreter of the target environment (default: this one), e.g. .venv-sglang/bin/python.",
)
_framework = click.option(
    "--framework",
    "frameworks",
    multiple=True,
    type=click.Choice(sorted(FRAMEWORKS)),
    help="Only this framework's patches (repeatable; default: every patches/<framework>/).",
)


@click.group("patch")
def patch_group() -> None:
    """Check, apply or revert POC's patches/<framework>/NNNN-*.patch on the installed framework.

    \b
    Each patch's header pins it to one exact framework version, e.g.
      # pocforge-patch: framework=vllm version=0.32.0
    Every patch is dry-run first; a version mismatch or a conflict refuses them all and
    changes nothing. Exit 0 ok, 1 refused, 2 bad input.
    """


@patch_group.command("check")
@click.argument("poc")
@_python
@_framework
def check_cmd(poc: str, python: str | None, frameworks: tuple[str, ...]) -> None:
    """Say per patch: applies cleanly, already applied, version mismatch or conflict. Read-only."""
    _finish(_run(check, poc, python, frameworks), "no patches")


@patch_group.command("apply")
@click.argument("poc")
@_python
@_framework
def apply_cmd(poc: str, python: str | None, frameworks: tuple[str, ...]) -> None:
    """Apply every patch of POC, or none; already applied patches are left as they are."""
    _finish(_run(apply, poc, python, frameworks), "no patches")


@patch_group.command("revert")
@click.argument("poc")
@_python
@_framework
@click.option(
    "--force",
    is_flag=True,
    help="Write the saved originals back even over files that changed since the apply.",
)
def revert_cmd(poc: str, python: str | None, frameworks: tuple[str, ...], force: bool) -> None:
    """Restore the files POC's patches changed, byte for byte, from the copies saved at apply."""
    _finish(_run(revert, poc, python, frameworks, force=force), "nothing to revert")


def _run(verb, poc: str, python: str | None, frameworks: tuple[str, ...], **kwargs) -> Report:
    try:
        spec = load_poc(poc)
        return verb(spec, python=python, frameworks=frameworks, **kwargs)
    except (SpecError, PatchError) as exc:
        fail(str(exc))


def _finish(report: Report, empty: str) -> None:
    for status in report.statuses:
        click.echo(status.line())
    if not report.statuses:
        click.echo(empty)
    if report.refused:
        click.echo("refused: nothing was changed", err=True)
        sys.exit(1)


def register(main: click.Group) -> None:
    main.add_command(patch_group)
