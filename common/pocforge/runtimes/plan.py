"""Every node's launch in its runtime: the one planner ``launch --print``, the runner, the
cluster stage and the golden plans use."""

from __future__ import annotations

import dataclasses
from pathlib import Path, PurePosixPath

from pocforge.frameworks import ADAPTERS, LaunchContext, NodeLaunch, gpu_profiler
from pocforge.frameworks.base import PROFILE_DIR, model_path, profiled
from pocforge.frameworks.disagg import plan_disaggregated
from pocforge.frameworks.launch_plan import WORKDIR
from pocforge.frameworks.megatron_init import converts, load_dir
from pocforge.frameworks.patching import releases
from pocforge.frameworks.patching.files import PatchError
from pocforge.frameworks.patching.on_nodes import FOLDER as OVERLAY
from pocforge.frameworks.patching.on_nodes import node_overlay
from pocforge.runtimes import container, slurm
from pocforge.runtimes.resolve import (
    WHEELS,
    Deployment,
    ResolvedRuntime,
    RuntimeSpecError,
    image_checkouts,
    node_poc_dir,
    resolve,
)
from pocforge.runtimes.secrets import launch_secrets, secrets_file
from pocforge.spec import PocSpec

# A hub model is cached on the node's local disk, beside the kit's other node folders,
# whatever the SSH user's home; the container is pointed at it with HF_HOME.
HF_HOME = "/opt/pocforge/hf-home"


def _mounts(spec: PocSpec, wheels: str = WHEELS, poc_dir: str | None = None) -> list[str]:
    """The weights (a staged or local folder), the kit's wheels (from ``wheels`` on the
    host), the POC folder (from ``poc_dir`` on the host, default where bring-up staged it)
    at :func:`~pocforge.runtimes.resolve.node_poc_dir`, the path the launches name."""
    mounts = []
    model = model_path(spec)
    if PurePosixPath(model).is_absolute():
        mounts.append(f"{model}:{model}:ro")
    else:  # a hub id: the node's cache, so a second start does not download again
        mounts.append(f"{HF_HOME}:{HF_HOME}")
    mounts.append(f"{wheels}:{WHEELS}:ro")
    if spec.source_dir is not None:
        inside = node_poc_dir(spec)
        mounts.append(f"{poc_dir or inside}:{inside}:ro")
    return mounts


def runtime_context(runtime: ResolvedRuntime, base: LaunchContext) -> LaunchContext:
    """``base`` with the interpreters the runtime's launches start (a venv's or an
    image's own; the kit's environments unchanged)."""
    if runtime.kind == "kit":
        return base
    python = runtime.node_python
    checkouts = image_checkouts(runtime.image) if runtime.kind == "container" else {}
    return dataclasses.replace(base, python=python, sglang_python=python, checkouts=checkouts)


def _in_venv(launch: NodeLaunch, runtime: ResolvedRuntime) -> NodeLaunch:
    """A launcher script (``ray``) from the venv's own ``bin/``."""
    if launch.argv and "/" not in launch.argv[0] and launch.argv[0] != runtime.node_python:
        script = str(Path(runtime.node_python).parent / launch.argv[0])
        launch = dataclasses.replace(launch, argv=[script, *launch.argv[1:]])
    return dataclasses.replace(launch, runtime={"kind": "venv", "python": runtime.node_python})


def plan_deployment(
    spec: PocSpec,
    deployment: Deployment,
    base: LaunchContext,
    *,
    node_env: dict[int, dict[str, str]] | None = None,
    out_dir: Path | None = None,
    wheels: str = WHEELS,
    poc_dir: str | None = None,
    patches: bool = True,
) -> list[NodeLaunch]:
    """The launches of one deployment, each in that deployment's runtime.

    ``node_env``: per node rank, variables for that node's launches (the platform's, from
    bring-up's facts, over the POC's ``runtime.env``); the framework adapter's own variables
    win. ``out_dir``: where a
    training launch writes its summary (relative: to the launch's working directory).
    ``wheels``: the host folder of the kit's wheels a container mounts (on a node, where
    bring-up copied them; here, ``provision.kit_wheels()``); ``poc_dir``: likewise the
    POC's folder (on a node, where bring-up staged it; here, the POC's own). ``patches``:
    the POC's framework patches run in the serving launches (:func:`_with_patches`; off for
    the parity baseline, and here, where ``pocforge patch apply`` patches the framework)."""
    section = spec.serving if deployment == "serving" else spec.training
    assert section is not None
    runtime = resolve(spec, deployment)
    adapter = ADAPTERS[section.framework]
    ctx = runtime_context(runtime, base)
    if deployment == "training" and out_dir is not None:
        launches = adapter.plan(spec, ctx, out_dir=out_dir)
    elif deployment == "serving" and spec.serving.disaggregation is not None:
        launches = plan_disaggregated(spec, ctx, adapter)
    else:
        launches = adapter.plan(spec, ctx)
    secrets = launch_secrets(spec, section.runtime.env)
    for one in launches:
        # The POC's runtime.env reaches every runtime, with bring-up's facts or without (a
        # stage run alone); the platform's variables carry it too, the caller's over them.
        extra = {**runtime.env, **(node_env or {}).get(one.node_rank, {})}
        if extra:
            one.env = {**extra, **one.env}
        if secrets and one.role != "router":  # by reference: the node's, never a value here
            one.secrets, one.secrets_file = list(secrets), secrets_file(spec)
    if deployment == "serving" and patches:
        _with_patches(spec, launches)
    return gpu_profiler.under_profiler(
        spec,
        deployment,
        launches,
        ctx.profile_dir,
        out_dir,
        in_runtime=lambda planned: _in_runtime(
            spec,
            section,
            runtime,
            planned,
            _mounts(spec, wheels, poc_dir),
            _written(spec, deployment, ctx),
        ),  # fmt: skip
    )


# The roles whose processes run the serving framework (the kit's P/D router does not); a
# Ray worker node's workers inherit its environment.
FRAMEWORK_ROLES = ("server", "headless", "prefill", "decode", "ray-head", "ray-worker")


def _with_patches(spec: PocSpec, launches: list[NodeLaunch]) -> None:
    """The POC's framework patches in every launch that runs the framework, whatever its
    runtime: an overlay folder among its files, first on its ``PYTHONPATH``
    (:mod:`~pocforge.frameworks.patching.on_nodes`), made on the release the nodes run."""
    try:
        overlay = node_overlay(spec, releases.cache())
    except PatchError as exc:
        raise RuntimeSpecError(f"patches: {exc}") from None
    if overlay is None:
        return
    folder = f"{WORKDIR}/{OVERLAY}"
    for one in launches:
        if one.role in FRAMEWORK_ROLES:
            one.files = {**one.files, **overlay}
            path = one.env.get("PYTHONPATH")
            one.env = {**one.env, "PYTHONPATH": f"{folder}:{path}" if path else folder}


def _written(spec: PocSpec, deployment: Deployment, ctx: LaunchContext) -> list[str]:
    """The folders a deployment's launches write into beside the run's own, which a
    container must mount or what they write ends with it: a profiled serving stage's
    profiler folder (:data:`~pocforge.frameworks.base.PROFILE_DIR` on a node), a
    converted checkpoint's."""
    if deployment == "serving" and profiled(spec):
        return [ctx.profile_dir or PROFILE_DIR]
    if deployment == "training" and converts(spec):
        return [str(load_dir(spec))]  # the conversion writes it, the trainer reads it
    return []


def _in_runtime(
    spec, section, runtime, launches: list[NodeLaunch], mounts: list[str], written: list[str]
):
    if runtime.kind == "venv":
        return [_in_venv(one, runtime) for one in launches]
    if runtime.kind == "container":
        kernels = bool(getattr(section, "kernels", None))
        fabric = spec.cluster.interconnect.scale_out.startswith(("roce", "ib-"))
        rdma = fabric and len({one.node_rank for one in launches}) > 1
        served = runtime
        if f"{HF_HOME}:{HF_HOME}" in mounts:
            served = dataclasses.replace(runtime, env={"HF_HOME": HF_HOME, **runtime.env})
        out = []
        for one in launches:
            if one.role == "router":  # the kit's P/D router: no GPU, model, fabric or profile
                wheels_only = [m for m in mounts if m.endswith(f":{WHEELS}:ro")]
                out.append(container.wrap(one, runtime, poc=spec.name, mounts=wheels_only,
                                          kernels=False, gpus=False))  # fmt: skip
            else:
                out.append(container.wrap(one, served, poc=spec.name, mounts=mounts,
                                          kernels=kernels, written=written, rdma=rdma))  # fmt: skip
        return out
    return launches


def plan_nodes(spec: PocSpec, base: LaunchContext) -> list[NodeLaunch]:
    """Every launch of every deployment in ``spec`` (serving first, then training), each in
    its runtime. ``base`` says where the nodes are (hosts, port) and, for the kit runtime,
    which local interpreters run."""
    launches: list[NodeLaunch] = []
    if spec.serving is not None:
        launches += plan_deployment(spec, "serving", base)
    if spec.training is not None:
        launches += plan_deployment(spec, "training", base)
    if spec.cluster.scheduler == "slurm":  # each a step of the run's allocation
        launches = [slurm.as_step(one, spec) for one in launches]
    return launches
