"""A deployment's runtime, with every default filled in from the GPU and the framework."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Literal

import yaml

from pocforge.catalog import gpu
from pocforge.runtimes.secrets import split_env
from pocforge.spec import PocSpec
from pocforge.spec.serving_schema import Runtime

Deployment = Literal["serving", "training"]
# Where bring-up builds a framework's venv on every node, and where the kit's wheels land.
VENVS = "/opt/pocforge/venvs"
WHEELS = "/opt/pocforge/wheels"
NODE_POCS = "/opt/pocforge/pocs"  # bring-up stages each POC's folder here: <NODE_POCS>/<name>


def node_poc_dir(spec: PocSpec) -> str:
    """Where the launches find the POC's folder on every node (a container mounts it there
    from wherever the host has it)."""
    return f"{NODE_POCS}/{spec.name}"


class RuntimeSpecError(ValueError):
    """A runtime this spec cannot have (one line naming the field and the fix)."""


@dataclass(frozen=True)
class ResolvedRuntime:
    kind: Literal["container", "venv", "kit"]
    framework: str
    vendor: Literal["amd", "nvidia", "none"]
    arch: str
    image: str | None = None
    engine: str = "docker"
    mounts: tuple[str, ...] = ()
    python: str | None = None  # venv: the interpreter on the nodes
    venv_archive: str | None = None  # venv: a tar of it bring-up unpacks (controller path)
    env: dict[str, str] = field(default_factory=dict)

    @property
    def node_python(self) -> str:
        """The interpreter the framework's argv starts with on the node."""
        if self.kind == "container":
            return self.python or "python3"  # the image's, unless the spec names one
        return self.python or "python"


@cache
def default_images() -> dict:
    return yaml.safe_load(resources.files("pocforge.runtimes").joinpath("images.yaml").read_text())


def default_image(framework: str, vendor: str, arch: str) -> str | None:
    """The kit's pinned image for ``framework`` on ``vendor`` GPUs of ``arch``, if any."""
    per_vendor = (default_images().get(framework) or {}).get(vendor) or {}
    entry = per_vendor.get(arch) or per_vendor.get("default")
    return entry["image"] if entry else None


def _catalog_entry(image: str) -> dict | None:
    """The kit's catalog entry of ``image`` (None: an image the catalog does not list)."""
    for vendors in default_images().values():
        for per_vendor in vendors.values():
            for entry in per_vendor.values():
                if entry["image"] == image:
                    return entry
    return None


def catalog_version(image: str) -> tuple[bool, str | None]:
    """(whether the kit's catalog lists ``image``, the framework version inside it: None
    where the catalog does not record one)."""
    entry = _catalog_entry(image)
    return (False, None) if entry is None else (True, entry.get("version"))


def image_checkouts(image: str | None) -> dict[str, str]:
    """Where a framework's checkouts are inside ``image`` (by ``training.megatron.entry``),
    as the catalog records them; {} for an image it does not list."""
    entry = _catalog_entry(image) if image else None
    return dict((entry or {}).get("checkouts") or {})


def resolve(spec: PocSpec, deployment: Deployment) -> ResolvedRuntime:
    """The runtime of ``spec``'s serving or training deployment; raises RuntimeSpecError."""
    section = spec.serving if deployment == "serving" else spec.training
    if section is None:
        raise RuntimeSpecError(f"{spec.name} has no {deployment} section")
    runtime: Runtime = section.runtime
    where = f"{deployment}.runtime"
    facts = gpu(spec.cluster.gpu)
    framework = section.framework
    kind = runtime.kind
    if kind is None:
        if not facts.is_gpu:
            kind = "container" if runtime.image else "kit"
        else:
            kind = "venv" if framework == "deepspeed" else "container"
    if kind == "kit" and facts.is_gpu:
        raise RuntimeSpecError(
            f"{where}.kind: kit means this machine's CPU environments, for cluster.gpu: cpu "
            f"only; on {spec.cluster.gpu} use container or venv"
        )
    if runtime.image_archive and kind != "container":
        raise RuntimeSpecError(
            f"{where}.image_archive: only a container runtime loads an image; this one is "
            f"{kind} (remove image_archive, or set {where}.kind: container)"
        )
    if runtime.venv_archive and (kind != "venv" or runtime.python is None):
        raise RuntimeSpecError(
            f"{where}.venv_archive: bring-up unpacks it for a venv runtime at the path "
            f"{where}.python names; set {where}.kind: venv and {where}.python "
            "(e.g. /opt/pocforge/venvs/cpu/bin/python), or remove venv_archive"
        )
    if kind == "venv" and not facts.is_gpu and runtime.python is None:
        raise RuntimeSpecError(
            f"{where}.python: a venv on cluster.gpu: cpu is not built by bring-up (the kit "
            f"pins no CPU index); ship one with {where}.venv_archive and name its "
            f"interpreter in {where}.python, or name an interpreter the nodes have"
        )
    image = runtime.image
    if kind == "container" and image is None:
        image = default_image(framework, facts.vendor, facts.arch)
        if image is None:
            raise RuntimeSpecError(
                f"{where}.image: the kit has no default {framework} image for "
                f"{spec.cluster.gpu}; name one, or set {where}.kind: venv"
            )
    python = runtime.python
    if kind == "venv" and python is None:
        python = f"{VENVS}/{framework}/bin/python"
    return ResolvedRuntime(
        kind=kind,
        framework=framework,
        vendor=facts.vendor,
        arch=facts.arch,
        image=image,
        engine=runtime.engine,
        mounts=tuple(runtime.mounts),
        python=python,
        venv_archive=runtime.venv_archive,
        env=split_env(runtime.env)[0],  # secrets go by reference (NodeLaunch.secrets)
    )
