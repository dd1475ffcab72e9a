"""The framework version a deployment's nodes really run, held against the one its spec
declares (``serving.version`` / ``training.version``).

- ``container``: the version inside the image, as the kit's catalog records it
  (``runtimes/images.yaml``, each from the public source that names the tag); an image the
  catalog does not list, or lists without a version, cannot be checked, and ``validate``
  says so.
- ``venv`` built by bring-up: it installs the declared version, so the two agree by
  construction; a venv the customer names (``runtime.python``) is the customer's word.
- ``kit`` (``cluster.gpu: cpu``): the version installed in the kit's own environment
  (``.venv``, ``.venv-sglang``), read from its files.

A spec that declares no version while its runtime's is known is told which to declare: the
launches are checked, and patches pinned, against the declared one.
"""

from __future__ import annotations

from dataclasses import dataclass

from pocforge.runtimes.resolve import (
    VENVS,
    ResolvedRuntime,
    RuntimeSpecError,
    catalog_version,
    resolve,
)
from pocforge.spec import PocSpec
from pocforge.versions import kit_framework_version


@dataclass(frozen=True)
class RunningVersion:
    """What the nodes run: the version (None: not known here) and where it comes from."""

    version: str | None
    source: str


def running_version(runtime: ResolvedRuntime) -> RunningVersion | None:
    """The version ``runtime`` runs; None where the runtime installs the declared one."""
    framework = runtime.framework
    if runtime.kind == "container" and runtime.image:
        listed, version = catalog_version(runtime.image)
        if not listed:
            return RunningVersion(None, f"image {runtime.image}, not in the kit's catalog")
        if version is None:
            return RunningVersion(None, f"image {runtime.image}, whose version is not recorded")
        return RunningVersion(version, f"image {runtime.image}")
    if runtime.kind == "kit":
        found = kit_framework_version(framework)
        if found is None:
            return RunningVersion(None, f"the kit's CPU environment, which lacks {framework}")
        env, dist, version = found
        return RunningVersion(version, f"the kit's {env} ({dist} {version})")
    if runtime.kind == "venv" and runtime.python and not runtime.python.startswith(VENVS + "/"):
        return RunningVersion(None, f"the nodes' own interpreter {runtime.python}")
    return None  # bring-up's venv (under VENVS) installs the declared version


def version_problems(spec: PocSpec) -> tuple[list[str], list[str]]:
    """(problems, notes): a declared version other than the one the nodes run, or none
    declared where it is known; notes name what could not be checked."""
    problems, notes = [], []
    for deployment in ("serving", "training"):
        section = getattr(spec, deployment)
        if section is None:
            continue
        try:
            runtime = resolve(spec, deployment)
        except RuntimeSpecError:
            continue  # plan_nodes reports it
        runs = running_version(runtime)
        if runs is None:
            continue
        field = f"{deployment}.version"
        name = section.framework
        if runs.version is None:
            notes.append(f"{spec.name}: {field} not checked: the nodes run {runs.source}")
        elif section.version is None:
            problems.append(
                f"{field}: not set, and the nodes run {name} {runs.version} ({runs.source}): "
                f"set {field}: {runs.version!r}"
            )
        elif section.version != runs.version:
            problems.append(
                f"{field}: {section.version!r}, but the nodes run {name} {runs.version} "
                f"({runs.source}): set {field}: {runs.version!r}, or "
                f"{deployment}.runtime.image to an image of {name} {section.version}"
            )
    return problems, notes
