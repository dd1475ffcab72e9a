"""Check many specs' launches with each framework's own parser, one subprocess per framework."""

from __future__ import annotations

from collections import defaultdict

from pocforge.frameworks import ADAPTERS, LaunchContext, plan_all
from pocforge.frameworks.argcheck.run import ArgcheckUnavailable
from pocforge.spec import PocSpec


def framework_problems(
    specs: list[PocSpec], ctx: LaunchContext
) -> tuple[dict[str, list[str]], list[str]]:
    """({spec name: problems}, notes about frameworks that could not be checked here)."""
    owner: dict[int, PocSpec] = {}
    by_framework: dict[str, list] = defaultdict(list)
    for spec in specs:
        for launch in plan_all(spec, ctx):
            owner[id(launch)] = spec
            by_framework[launch.framework].append(launch)
    problems: dict[str, list[str]] = defaultdict(list)
    notes = []
    for framework, launches in by_framework.items():
        try:
            found = ADAPTERS[framework].check(launches, ctx)
        except ArgcheckUnavailable as exc:
            notes.append(f"{framework} arguments not checked: {exc}")
            continue
        for launch, message in found:
            problems[owner[id(launch)].name].append(
                f"{launch.deployment} node {launch.node_rank} ({launch.role}): {message}"
            )
    return dict(problems), notes
