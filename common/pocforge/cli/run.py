"""``pocforge run POC``: every stage of a POC on this machine, then its verdict."""

from __future__ import annotations

import os
import sys

import click
from rich.console import Console
from rich.table import Table

from pocforge.cli.common import fail, os_error_line
from pocforge.spec import SpecError, load_poc

# Every stage a run can have (kept in step with pocforge.runner.CLUSTER_STAGES by a test;
# not imported from there so `pocforge --help` stays light).
STAGE_NAMES = (
    "bringup", "preflight", "collectives", "kernels", "serving", "parity", "training", "report"
)  # fmt: skip
VERDICT_STYLE = {"pass": "green", "fail": "red", "inconclusive": "yellow", "none": "dim"}


def literal(console: Console):
    """The runner's ``say`` on ``console``: each line printed as it is and whole. A line may
    quote a server's log (``[wrapper.py:100]`` is no markup, and a ``[/...]`` in it would
    raise), and one line stays one line in a captured log."""

    def say(line: str) -> None:
        console.print(line, markup=False, highlight=False, soft_wrap=True)

    return say


@click.command("run")
@click.argument("poc")
@click.option(
    "--resume", metavar="RUN_ID", help="Continue this run: stages already complete are skipped."
)
@click.option(
    "--stage",
    "stages",
    multiple=True,
    type=click.Choice(list(STAGE_NAMES)),
    help="Run only these stages (repeatable); default: every stage the spec implies.",
)
def run_cmd(poc: str, resume: str | None, stages: tuple[str, ...]) -> None:
    """Run POC end to end and judge its criteria: on its nodes when it has hosts or an
    inventory (bring-up, preflight, collectives, deployment, benchmark, teardown), else here.

    Exit 0 when every criterion passes, 1 when one fails or is inconclusive or a stage
    failed, 130 when interrupted (everything gathered so far is kept; see --resume).
    """
    from pocforge.frameworks.process import LaunchError
    from pocforge.results.store import RunError
    from pocforge.runner import RunnerError, run_poc

    try:
        spec = load_poc(poc)
    except SpecError as exc:
        fail(str(exc))
    console = Console()
    try:
        run = run_poc(spec, resume=resume, only=list(stages) or None, say=literal(console))
    except (RunnerError, RunError, SpecError) as exc:
        fail(str(exc))
    except LaunchError as exc:
        fail(str(exc), code=1)
    except KeyboardInterrupt:
        sys.exit(130)
    except OSError as exc:  # a results disk that filled up or went read-only
        if os.environ.get("POCFORGE_DEBUG"):
            raise
        fail(os_error_line(exc), code=1)
    except Exception as exc:  # a stage broke: the run keeps what it gathered and says so
        if os.environ.get("POCFORGE_DEBUG"):
            raise
        fail(f"error: {type(exc).__name__}: {exc} (set POCFORGE_DEBUG=1 for the traceback)", code=1)
    verdict = print_verdicts(run, spec.name, console)
    sys.exit(0 if verdict in ("pass", "none") and run.manifest.status == "complete" else 1)


def print_verdicts(run, name: str, console: Console) -> str:
    """The acceptance table of a run and its overall verdict (returned)."""
    from pocforge.results.verdicts import judge_run, overall

    verdicts = judge_run(run)
    table = Table(
        "criterion",
        "measured",
        "95% CI",
        "margin",
        "verdict",
        title=f"{name} acceptance",
        box=None,
    )
    for v in verdicts:
        ci = (
            f"[{v.ci_low:.4g}, {v.ci_high:.4g}]"
            if v.ci_low is not None and v.ci_high is not None
            else "-"
        )
        measured = f"{v.estimate:.4g}" if v.estimate is not None else "-"
        margin = f"{v.margin:+.4g}" if v.margin is not None else "-"
        table.add_row(
            v.criterion, measured, ci, margin, f"[{VERDICT_STYLE[v.verdict]}]{v.verdict}[/]"
        )
    console.print(table)
    verdict = overall(verdicts)
    console.print(f"overall: [{VERDICT_STYLE[verdict]}]{verdict.upper()}[/]   run: {run.path}")
    return verdict


def register(main: click.Group) -> None:
    main.add_command(run_cmd)
