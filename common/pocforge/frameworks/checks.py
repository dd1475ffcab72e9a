"""Check many specs' launches with each framework's own parser, one subprocess per framework,
the frameworks side by side (each parser spends seconds importing its framework on one core:
`pocforge validate` of every example POC took 14.5 s here instead of 22.5)."""

from __future__ import annotations

from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pocforge.frameworks import ADAPTERS, LaunchContext, plan_all
from pocforge.frameworks.argcheck.run import ArgcheckUnavailable
from pocforge.frameworks.megatron_init import converts
from pocforge.frameworks.patching.releases import ReleaseError
from pocforge.frameworks.patching.releases import cache as release_cache
from pocforge.frameworks.release_flags import READERS, FlagsUnreadable, release_flags
from pocforge.spec import PocSpec
from pocforge.versions import kit_framework_version


def framework_problems(
    specs: list[PocSpec], ctx: LaunchContext, releases: Path | None = None
) -> tuple[dict[str, list[str]], list[str]]:
    """({spec name: problems}, notes about what could not be checked here). A vLLM or SGLang
    launch for another release than the one installed here is held to that release's flags,
    read from its released source (fetched into ``releases`` once)."""
    owner: dict[int, PocSpec] = {}
    by_framework: dict[str, list] = defaultdict(list)
    by_release: dict[tuple[str, str], list] = defaultdict(list)
    here = {framework: kit_framework_version(framework) for framework in READERS}
    for spec in specs:
        for launch in plan_all(spec, ctx):
            owner[id(launch)] = spec
            declared = getattr(spec, launch.deployment).version
            installed = here.get(launch.framework)
            if (
                launch.framework in READERS
                and declared
                and declared != (installed[2] if installed else None)
            ):
                by_release[launch.framework, declared].append(launch)
            else:
                by_framework[launch.framework].append(launch)
    problems: dict[str, list[str]] = defaultdict(list)
    notes = []

    def check(framework: str):
        try:
            return ADAPTERS[framework].check(by_framework[framework], ctx)
        except ArgcheckUnavailable as exc:
            return exc

    with ThreadPoolExecutor(max_workers=max(1, len(by_framework))) as pool:
        answers = dict(zip(by_framework, pool.map(check, by_framework), strict=True))
    for framework, found in answers.items():  # in the specs' order, as before
        if isinstance(found, ArgcheckUnavailable):
            notes.append(f"{framework} arguments not checked: {found}")
            continue
        notes += _other_versions(framework, specs)
        if framework == "megatron":
            notes += _megatron_lm_unchecked(specs)
        for launch, message in found:
            problems[owner[id(launch)].name].append(_where(launch, message))
    cache = releases or release_cache()
    for (framework, version), launches in by_release.items():
        names = sorted({owner[id(one)].name for one in launches})
        try:
            defined = release_flags(framework, version, cache)
        except (ReleaseError, FlagsUnreadable) as exc:
            notes += [
                f"{name}: {framework} {version}'s flags could not be read ({exc}): its launches "
                f"are not checked here; bring-up's launch check runs {framework} {version}'s own "
                "parser on each node"
                for name in names
            ]
            continue
        notes += [
            f"{name}: {framework} launches checked against {framework} {version}'s flags, read "
            f"from its released source ({defined.layout}); their values are judged by "
            f"{framework} {version}'s own parser on each node at bring-up"
            for name in names
        ]
        for launch in launches:
            for flag in defined.unknown(launch.check_args or []):
                problems[owner[id(launch)].name].append(
                    _where(
                        launch,
                        f"{framework} {version} has no {flag} (its released source defines no "
                        f"such flag): remove it, or run a release that has it "
                        f"({launch.deployment}.version and the image of that release)",
                    )
                )
    return dict(problems), notes


def _where(launch, message: str) -> str:
    return f"{launch.deployment} node {launch.node_rank} ({launch.role}): {message}"


def _other_versions(framework: str, specs: list[PocSpec]) -> list[str]:
    """A note per spec whose declared ``framework`` version is not the one whose parser
    checked its launches (the kit's CPU build), for a framework whose releases' flags the kit
    cannot read: a flag only one of them knows goes unnoticed."""
    found = kit_framework_version(framework)
    if found is None or framework in READERS:
        return []
    _env, dist, checked = found
    out = []
    for spec in specs:
        for deployment in ("serving", "training"):
            section = getattr(spec, deployment)
            if section is None or section.framework != framework or not section.version:
                continue
            if section.version != checked:
                out.append(
                    f"{spec.name}: {deployment} launches of {framework} {section.version} checked "
                    f"with {dist} {checked}'s arguments: a flag only one of them knows is not "
                    "caught"
                )
    return out


def _megatron_lm_unchecked(specs: list[PocSpec]) -> list[str]:
    """Without Megatron-LM here (the package index has Megatron-Core only), its own parser
    did not run: only the model and layout flags went through Megatron-Core's
    ``TransformerConfig``. A note per Megatron spec, naming its hand-written flags."""
    import importlib.util

    try:
        here = importlib.util.find_spec("megatron.training") is not None
    except ModuleNotFoundError:
        here = False
    if here:
        return []
    out = []
    for spec in specs:
        training = spec.training
        if training is None or training.framework != "megatron":
            continue
        extra = list(training.megatron.extra_args) if training.megatron else []
        named = f" (training.megatron.extra_args: {' '.join(extra)})" if extra else ""
        out.append(
            f"{spec.name}: Megatron-LM's own argument parser is not installed here, only "
            f"Megatron-Core's model and layout checks ran: its other flags{named} are not "
            "checked until a node runs them"
        )
        if converts(spec) and spec.cluster.gpu != "cpu":
            out.append(
                f"{spec.name}: training.init converts with Megatron-Bridge at "
                f"{training.init.bridge_path} in the training image (NVIDIA's NeMo containers have it; "
                "other images need it mounted there, training.init.bridge_path): not checked "
                "until a node runs it"
            )
    return out
