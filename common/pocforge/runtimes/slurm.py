"""Clusters a scheduler owns: a POC's launches as job steps of one Slurm allocation.

A run on ``cluster.scheduler: slurm`` takes one allocation that holds its nodes for every
stage (:func:`allocation`: ``salloc --no-shell``, the spec's partition, account, QoS,
reservation, time limit and node choice). Each launch then runs as a step on its node of
that allocation (:func:`as_step`), the node chosen by its rank within the allocation
(``--relative``), so a plan needs no node names before Slurm gives them:

- a container runtime on the node's own engine (AMD sites: docker, as Primus's and
  InferenceX's Slurm scripts start it) runs the same ``docker run`` line inside the step;
- with pyxis (NVIDIA sites: ``srun --container-image``) the image is imported once per node
  (:func:`import_step`, under ``flock`` so two steps never import it at once) and the
  step runs the launch's own command in it, with the same mounts, working directory and
  environment (``--container-env`` names the variables the step carries in);
- a venv's interpreter runs in the step as it is.

Steps overlap (``--overlap``: a node's Ray head, server and telemetry share it), end the
job's other steps when one fails (``--kill-on-bad-exit``) and carry the caller's
environment (Slurm's default ``--export=ALL``). ``{slurm_job}`` stands for the allocation's
job id and ``{slurm_nodeN}`` for its nodes until Slurm names them (the run puts them in,
as the process manager puts in ``{workdir}``).
"""

from __future__ import annotations

import dataclasses
import os
import re

from pocforge.catalog import gpu
from pocforge.frameworks.launch_plan import SLURM_JOB, NodeLaunch
from pocforge.spec import PocSpec

# What a step the kit starts on a node carries of the caller's environment: a login PATH
# and who runs it, not the controller's environments (srun's default is all of it)
LOGIN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
IMAGES = "/opt/pocforge/images"  # where a node keeps the images enroot imported


def job_name(spec: PocSpec) -> str:
    """The name the run's allocation carries in Slurm's queue."""
    return f"pocforge-{spec.name}"


def allocation(spec: PocSpec) -> list[str]:
    """The ``salloc`` that takes the run's nodes and holds them without a shell."""
    slurm, cluster = spec.cluster.slurm, spec.cluster
    assert slurm is not None
    argv = ["salloc", "--no-shell", f"--job-name={job_name(spec)}", f"--nodes={cluster.nodes}"]
    for flag, value in (
        ("partition", slurm.partition),
        ("account", slurm.account),
        ("qos", slurm.qos),
        ("reservation", slurm.reservation),
    ):
        if value:
            argv.append(f"--{flag}={value}")
    argv.append(f"--time={slurm.time_limit}")
    if slurm.nodelist:
        argv.append(f"--nodelist={','.join(slurm.nodelist)}")
    if slurm.exclude:
        argv.append(f"--exclude={','.join(slurm.exclude)}")
    if slurm.exclusive:
        argv.append("--exclusive")
    if gpu(cluster.gpu).is_gpu:
        argv.append(f"--gpus-per-node={cluster.gpus_per_node}")
    return argv


def node_step(job: str) -> list[str]:
    """The start of a step of allocation ``job`` on one node (the caller adds
    ``--nodelist``): one task, sharing the node with the run's other steps, with a plain
    environment (``SLURM_CONF`` too where this machine names one, and ``SLURM_OVERLAP`` so a
    step started from the node, mpirun's daemons, overlaps as well). The playbooks' srun
    connection starts every task's command with it, the workload role its launcher."""
    exported = [f"PATH={LOGIN_PATH}", "HOME", "USER", "LANG=C.UTF-8", "SLURM_OVERLAP=1"]
    if "SLURM_CONF" in os.environ:
        exported.append("SLURM_CONF")
    return [
        "srun",
        f"--jobid={job}",
        "--nodes=1",
        "--ntasks=1",
        "--overlap",
        "--quiet",
        f"--export={','.join(exported)}",
    ]


def uses_pyxis(spec: PocSpec) -> bool:
    """Container launches start through pyxis: as the spec says, else on NVIDIA GPUs."""
    slurm = spec.cluster.slurm
    assert slurm is not None
    if slurm.pyxis is not None:
        return slurm.pyxis
    return gpu(spec.cluster.gpu).vendor == "nvidia"


def enroot_uri(image: str) -> str:
    """``docker://`` for enroot, which writes a registry host apart with ``#``
    (``nvcr.io/nvidia/x:1`` -> ``docker://nvcr.io#nvidia/x:1``; Docker Hub names stay)."""
    first, _, rest = image.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return f"docker://{first}#{rest}"
    return f"docker://{image}"


def image_file(image: str) -> str:
    """The squashfs file a node keeps ``image`` in."""
    return f"{IMAGES}/{re.sub(r'[^A-Za-z0-9_.-]', '+', image)}.sqsh"


def _step(launch: NodeLaunch, spec: PocSpec) -> list[str]:
    name = f"{job_name(spec)}-{launch.role}-{launch.node_rank}"
    if launch.instance is not None:
        name += f"-{launch.instance}"
    return [
        "srun",
        f"--jobid={SLURM_JOB}",
        "--nodes=1",
        "--ntasks=1",
        f"--relative={launch.node_rank}",
        "--overlap",
        "--kill-on-bad-exit=1",
        f"--job-name={name}",
    ]


def import_step(spec: PocSpec, image: str) -> list[str]:
    """One step on every node of the allocation that imports ``image`` once: the first to
    hold the node's lock imports it, the others find the file there."""
    target = image_file(image)
    script = f"test -f {target} || enroot import --output {target} {enroot_uri(image)}"
    return [
        "srun",
        f"--jobid={SLURM_JOB}",
        f"--nodes={spec.cluster.nodes}",
        "--ntasks-per-node=1",
        "--overlap",
        f"--job-name={job_name(spec)}-image",
        "flock",
        f"{target}.lock",
        "sh",
        "-c",
        f"mkdir -p {IMAGES} && {script}",
    ]


VISIBLE = "CUDA_VISIBLE_DEVICES"


def _pyxis(launch: NodeLaunch, step: list[str]) -> NodeLaunch:
    """The container launch's own command in pyxis's container of the same image: its
    ``--volume`` mounts and ``--workdir`` as pyxis flags, the variables the container
    runtime recorded (``runtime.env``) carried into the step and named. A launch
    pinned to some of the node's GPUs (a P/D instance's ``CUDA_VISIBLE_DEVICES``) asks the
    step for that many (``--gpus``): Slurm binds them and sets the variable itself, as a
    pyxis container sees only the step's devices."""
    runtime = dict(launch.runtime or {})
    argv, image = launch.argv, runtime["image"]
    head = argv[: argv.index(image)]
    mounts, workdir = [], None
    for flag, value in zip(head, head[1:], strict=False):
        if flag == "--volume":
            mounts.append(value)
        elif flag == "--workdir":
            workdir = value
    env = dict(runtime.get("env") or {})
    pinned = env.pop(VISIBLE, None)
    names = sorted({*env, *launch.secrets})
    flags = [f"--gpus={len(pinned.split(','))}"] if pinned else []
    flags += [f"--container-image={image_file(image)}", "--no-container-mount-home"]
    if mounts:
        flags.append(f"--container-mounts={','.join(mounts)}")
    if workdir:
        flags.append(f"--container-workdir={workdir}")
    if names:
        flags.append(f"--container-env={','.join(names)}")
    runtime.update(kind="pyxis", image_file=image_file(image))
    return dataclasses.replace(
        launch,
        argv=[*step, *flags, *argv[argv.index(image) + 1 :]],
        env={**env, **{k: v for k, v in launch.env.items() if k != VISIBLE}},
        runtime=runtime,
    )


def as_step(launch: NodeLaunch, spec: PocSpec) -> NodeLaunch:
    """``launch`` as a job step on its node of the run's allocation."""
    step = _step(launch, spec)
    runtime = launch.runtime or {}
    if runtime.get("kind") == "container" and uses_pyxis(spec):
        return _pyxis(launch, step)
    return dataclasses.replace(launch, argv=[*step, *launch.argv])


def images(launches: list[NodeLaunch]) -> list[str]:
    """The images pyxis steps run, each once, in plan order."""
    return list(
        dict.fromkeys(
            one.runtime["image"]
            for one in launches
            if one.runtime and one.runtime.get("kind") == "pyxis"
        )
    )
