"""``pocforge patch check|apply|revert POC``: a POC's framework patches on the installed framework;
``pocforge patch status POC --against FRAMEWORK==VERSION|latest``: how they fare on a release.

Exit codes: 0 ok, 1 refused (version mismatch, conflict, framework missing, stale record:
nothing was changed; for ``status``, a patch that conflicts), 2 bad input (unknown POC,
malformed patch file, unusable --python, a release the index does not have).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

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


@patch_group.command("status")
@click.argument("poc")
@click.option(
    "--against",
    metavar="FRAMEWORK==VERSION|latest",
    help="The release to judge the patches on (vllm==0.33.0), or each framework's newest.",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON document, for CI.")
def status_cmd(poc: str, against: str | None, as_json: bool) -> None:
    """Say per patch how it fares on another release: already upstream, applies cleanly,
    applies with offsets or fuzz, or conflicts (which hunks, at which lines). The release's
    source is fetched from the package index once (.artifacts/releases) and only read."""
    from pocforge.frameworks.patching import releases
    from pocforge.frameworks.patching.against import record, status
    from pocforge.paths import workspace_root

    try:
        spec, groups = _patches_of(poc, "--against", against)
        say = (lambda line: None) if as_json else (lambda line: click.echo(line, err=True))
        judged = status(groups, against, releases.cache(), say)
        record(spec.name, judged, workspace_root() / ".artifacts" / "patch-status")
    except (SpecError, PatchError, ValueError) as exc:
        fail(str(exc))
    if as_json:
        click.echo(
            json.dumps(
                {"poc": spec.name, "against": against, "patches": [j.as_dict() for j in judged]},
                indent=2,
            )
        )
    else:
        for one in judged:
            click.echo(one.line())
        if not judged:
            click.echo("no patches")
    if any(one.verdict == "conflicts" for one in judged):
        sys.exit(1)


@patch_group.command("rebase")
@click.argument("poc")
@click.option(
    "--to",
    "to",
    metavar="FRAMEWORK==VERSION|latest",
    help="The release to move the patches to (vllm==0.33.0), or each framework's newest.",
)
def rebase_cmd(poc: str, to: str | None) -> None:
    """Rewrite each patch that still applies (cleanly, at an offset or with fuzz) against
    that release, pinned to it; the old file stays beside it (NNNN-x.patch.pinned-<old>).
    A patch that conflicts is refused (its hunks and lines), one already upstream is left
    and said; exit 1 when any is refused."""
    from pocforge.frameworks.patching import releases
    from pocforge.frameworks.patching.rebase import rebase

    try:
        spec, groups = _patches_of(poc, "--to", to)
        say = lambda line: click.echo(line, err=True)  # noqa: E731 - progress on stderr
        done = rebase(groups, to, releases.cache(), say)
    except (SpecError, PatchError, ValueError) as exc:
        fail(str(exc))
    for one in done:
        click.echo(one.line())
    moved = sorted({(one.judged.framework, one.judged.release) for one in done if one.written})
    for framework, release in moved:
        click.echo(
            f"now pin the POC to it: serving.version or training.version: '{release}' ({framework})"
        )
    if any(one.refused for one in done):
        sys.exit(1)


def _patches_of(poc: str, option: str, value: str | None):
    """(the POC's spec, its patches per framework) for a verb that judges them on a release
    named by ``option``; a PatchError naming what is missing."""
    from pocforge.frameworks.patching import discover

    spec = load_poc(poc)  # a POC that does not exist is named first
    if value is None:
        raise PatchError(f"{option} is missing: give FRAMEWORK==VERSION (vllm==0.33.0) or latest")
    if spec.source_dir is None:
        raise PatchError(f"{spec.name}: the spec was not loaded from a file, so it has no patches/")
    return spec, discover(spec.source_dir / "patches")


@patch_group.command("report")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write it here (default: stdout).",
)
def report_cmd(out: Path | None) -> None:
    """Every patch of every POC in pocs/: the customer and reason, where it stands upstream,
    the runs that proved it (results/) and how it fares on the newest release checked
    (`pocforge patch status`), as one markdown table for the product planning meeting."""
    from pocforge.paths import pocs_dir, results_root, workspace_root
    from pocforge.report.patches import markdown, rows

    try:
        text = markdown(
            rows(pocs_dir(), results_root(), workspace_root() / ".artifacts" / "patch-status")
        )
    except PatchError as exc:
        fail(str(exc))
    if out is None:
        click.echo(text, nl=False)
    else:
        out.write_text(text)
        click.echo(f"report: {out}")


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
