"""Run an argcheck script under a framework's interpreter and read its verdicts."""

from __future__ import annotations

import json
import subprocess

from pocforge.frameworks.argcheck import SCRIPTS
from pocforge.frameworks.launch_check import verdict
from pocforge.frameworks.launch_plan import NodeLaunch


class ArgcheckUnavailable(RuntimeError):
    """The framework is not installed for that interpreter; nothing was checked."""


def rejected(
    items: list[tuple[NodeLaunch, str, object]], python: str, what: str
) -> list[tuple[NodeLaunch, str]]:
    """Run ``items`` (one script: an adapter's ``check_items``) under ``python``; each
    launch the framework rejects, with ``what`` before its message."""
    if not items:
        return []
    (script,) = {script for _, script, _ in items}
    verdicts = run_argcheck(python, script, [item for _, _, item in items])  # type: ignore[misc]
    return [
        (launch, f"{what}: {verdict}")
        for (launch, _, _), verdict in zip(items, verdicts, strict=True)
        if verdict
    ]


def run_argcheck(
    python: str, script: str, argvs: list[list[str]], timeout_s: float = 300
) -> list[str | None]:
    """One verdict per argv: None when the framework's parser accepts it, else its message."""
    try:
        result = subprocess.run(
            [python, str(SCRIPTS / f"{script}.py")],
            input=json.dumps(argvs),
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except FileNotFoundError:
        raise ArgcheckUnavailable(f"no interpreter at {python}") from None
    if "ModuleNotFoundError" in result.stderr and result.returncode != 0:
        raise ArgcheckUnavailable(result.stderr.strip().splitlines()[-1])
    verdicts = verdict(result.stdout)
    if result.returncode != 0 or verdicts is None:
        tail = "\n".join(result.stderr.strip().splitlines()[-5:])
        raise RuntimeError(
            f"argument check under {python} failed (exit {result.returncode}): {tail}"
        )
    return verdicts
