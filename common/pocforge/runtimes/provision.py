"""What bring-up puts on the nodes for a spec's runtimes, and the kit's wheels it copies.

- every ``venv`` runtime: a virtual environment at ``/opt/pocforge/venvs/<framework>``
  (or the interpreter the spec names, left as it is) with the kit's requirement file for
  the accelerator (``requirements/rocm.txt``, ``requirements/cuda.txt``: the PyTorch wheel
  index and pins) plus the framework at the spec's version, then the kit's two
  distributions from the copied wheels, without dependencies and without an index (the
  training driver and the kernels run inside the framework's environment);
- every ``container`` runtime: its image, pulled, or (nodes that reach no registry) its
  ``image_archive`` copied from the controller to a node that lacks the image and loaded
  there; checked against ``image_id`` when the spec pins one (the ``container_image`` role);
- the kit's wheels (``pocforge``, ``pocforge-kernels``), built here and copied to
  ``/opt/pocforge/wheels`` on every node whenever a runtime is not the kit's own;
- every GPU profiler a deployment runs under (``profile.tool``: nsys, rocprofv3), looked
  for where its launches run it, before any launch (the ``profiler_tools`` role).

The kit runtime (``cluster.gpu: cpu``, no ``runtime``) needs nothing on the nodes: its
launches name this machine's environments, for a POC run on this machine. CPU nodes (a
rehearsal's) take a venv runtime from an archive (``runtime.venv_archive``) or a container
runtime, as GPU nodes do.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

from pocforge.frameworks.base import profiled_workload
from pocforge.frameworks.gpu_profiler import chosen
from pocforge.paths import kit_root, workspace_root
from pocforge.runtimes.resolve import (
    VENVS,
    WHEELS,
    Deployment,
    ResolvedRuntime,
    node_poc_dir,
    resolve,
)
from pocforge.runtimes.secrets import secret_values, secrets_file
from pocforge.spec import PocSpec

# Accelerator vendor -> the kit's requirement file for a framework venv on that GPU.
REQUIREMENTS = {"amd": "rocm.txt", "nvidia": "cuda.txt"}
# The framework's distribution on a GPU node (what pip installs at the spec's version).
DISTRIBUTIONS = {
    "vllm": "vllm",
    "sglang": "sglang[all]",
    "trtllm": "tensorrt-llm",  # PyPI's name (its console script is trtllm-serve)
    "deepspeed": "deepspeed",
}
# The kit's distributions and the folders they build from (kit_root()-relative).
KIT_DISTRIBUTIONS = {"pocforge": "common", "pocforge-kernels": "kernels"}


def _deployments(spec: PocSpec) -> list[tuple[Deployment, object]]:
    out: list[tuple[Deployment, object]] = []
    if spec.serving is not None:
        out.append(("serving", spec.serving))
    if spec.training is not None:
        out.append(("training", spec.training))
    return out


def runtimes(spec: PocSpec) -> list[ResolvedRuntime]:
    return [resolve(spec, deployment) for deployment, _ in _deployments(spec)]


def needs_kit_wheels(spec: PocSpec) -> bool:
    return any(runtime.kind != "kit" for runtime in runtimes(spec))


def requirement_lines(vendor: str) -> list[str]:
    """The kit's requirement file for ``vendor``'s GPUs, as lines pip reads."""
    path = kit_root() / "requirements" / REQUIREMENTS[vendor]
    return [
        line.strip()
        for line in path.read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]


def venvs(spec: PocSpec) -> list[dict]:
    """The ``python_env`` role's environments: one per environment folder of a deployment in
    a venv runtime (two deployments in one environment share it). ``create``: bring-up makes
    it, from ``archive`` (unpacked; ``archive_key`` says which, so a new archive replaces
    it) or else with pip from ``requirements``; otherwise it is the node's, left as it is."""
    out: dict[str, dict] = {}
    for deployment, section in _deployments(spec):
        runtime = resolve(spec, deployment)
        if runtime.kind != "venv" or runtime.python in out:
            continue
        default = f"{VENVS}/{runtime.framework}/bin/python"
        archive = _on_controller(spec, runtime.venv_archive)
        created = runtime.python == default or archive is not None
        requirements: list[str] = []
        if created and archive is None:
            requirements = requirement_lines(runtime.vendor)
            version = getattr(section, "version", None)
            name = DISTRIBUTIONS[runtime.framework]
            requirements.append(f"{name}=={version}" if version else name)
        out[runtime.python] = {
            "name": runtime.framework,
            "python": runtime.python,
            "create": created,
            "requirements": requirements,
            "archive": archive,
            "archive_key": _archive_key(archive),
        }
    return list(out.values())


def _on_controller(spec: PocSpec, path: str | None) -> str | None:
    """A file the spec names on the controller, relative to the POC folder."""
    if path and spec.source_dir is not None:
        return str((spec.source_dir / path).resolve())
    return path


def _archive_key(archive: str | None) -> str | None:
    """Which archive a node's environment came from: its size and modification time (a
    digest of a multi-gigabyte file would cost seconds at every bring-up)."""
    if archive is None:
        return None
    try:
        stat = Path(archive).stat()
    except OSError:
        return None  # the role's copy fails naming the file
    return f"{stat.st_size}-{stat.st_mtime_ns}"


def images(spec: PocSpec) -> list[dict]:
    """The ``container_image`` role's images: engine, image, an archive to load (or None:
    pull) and the id it must have (or None), one entry per distinct image."""
    seen: dict[tuple[str, str], dict] = {}
    for deployment, section in _deployments(spec):
        runtime = resolve(spec, deployment)
        if runtime.kind != "container" or runtime.image is None:
            continue
        # on the controller; copied when needed
        archive = _on_controller(spec, section.runtime.image_archive)
        wanted_id = section.runtime.image_id
        seen.setdefault(
            (runtime.engine, runtime.image),
            {
                "engine": runtime.engine,
                "image": runtime.image,
                "archive": archive,
                "id": wanted_id.removeprefix("sha256:") if wanted_id else None,
            },
        )
    return list(seen.values())


def _profile_field(spec: PocSpec, deployment: Deployment) -> str:
    """The spec field that asks for a deployment's GPU profiler (named in bring-up's error)."""
    if deployment == "training":
        return "training.profile.tool"
    return f"serving.workloads[{profiled_workload(spec).name}].profile.tool"


def profiler_checks(spec: PocSpec) -> list[dict]:
    """The ``profiler_tools`` role's checks: each GPU profiler a deployment runs under, where
    its launches run it (a container runtime's image, else the node's ``PATH``), and for
    nsys in an image the node's own too (the node sums each report: ``nsys stats``)."""
    out: dict[tuple, dict] = {}

    def add(tool: str, runtime: ResolvedRuntime | None, field: str, purpose: str) -> None:
        image = runtime.image if runtime is not None else None
        engine = runtime.engine if runtime is not None else None
        out.setdefault(
            (tool, engine, image),
            {"tool": tool, "engine": engine, "image": image, "field": field, "purpose": purpose},
        )

    for deployment, _section in _deployments(spec):
        choice = chosen(spec, deployment, None)
        if choice is None:
            continue
        runtime = resolve(spec, deployment)
        field = _profile_field(spec, deployment)
        contained = runtime if runtime.kind == "container" else None
        add(choice.tool, contained, field, f"the {deployment} launches run under it")
        if choice.tool == "nsys" and contained is not None:
            add("nsys", None, field, "it sums each report into the kernel table (nsys stats)")
    return list(out.values())


def bringup_vars(spec: PocSpec) -> dict:
    """Bring-up's variables for the spec's runtimes (the wheels come from the runner)."""
    out: dict = {"python_env_venvs": venvs(spec), "container_image_images": images(spec)}
    if spec.source_dir is not None:  # the POC's folder, where its launches find it
        out["poc_folder_src"] = str(spec.source_dir.resolve())
        out["poc_folder_dest"] = node_poc_dir(spec)
    secrets = secret_values(spec)
    if secrets:  # what its launches take by reference, in a 0600 file (no_log)
        out["poc_folder_secrets"] = secrets
        out["poc_folder_secrets_file"] = secrets_file(spec)
    checks = profiler_checks(spec)
    if checks:
        out["profiler_tools_checks"] = checks
    if needs_kit_wheels(spec):
        out["python_env_wheels_dir"] = WHEELS
    return out


def _source_files() -> list[Path]:
    """The files the wheels are built from: git's view of the kit's two folders (tracked
    and new, ignored ones left out: build/, *.egg-info, caches), else every file."""
    root = kit_root()
    folders = list(KIT_DISTRIBUTIONS.values())
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z", *folders],
        cwd=root,
        capture_output=True,
    )
    if listed.returncode == 0 and listed.stdout:
        names = sorted(set(listed.stdout.decode().split("\0")) - {""})
        return [root / name for name in names if (root / name).is_file()]
    return sorted(
        path
        for folder in folders
        for path in (root / folder).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    )


def _source_key() -> str:
    """A digest of the kit's sources: the same sources give the same wheel folder, so
    copying it to the nodes again changes nothing."""
    digest = hashlib.sha256()
    root = kit_root()
    for path in _source_files():
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def kit_wheels(cache: Path | None = None) -> Path:
    """The kit's wheels for the nodes, built once per source state (``pip wheel
    --no-deps``, pure Python, seconds); the folder holding them."""
    cache = cache or workspace_root() / ".artifacts" / "wheels"
    folder = cache / _source_key()
    wanted = {name.replace("-", "_") for name in KIT_DISTRIBUTIONS}
    if {p.name.split("-")[0] for p in folder.glob("*.whl")} >= wanted:
        return folder
    partial = folder.with_name(folder.name + ".partial")
    partial.mkdir(parents=True, exist_ok=True)
    sources = [kit_root() / folder_name for folder_name in KIT_DISTRIBUTIONS.values()]
    # setuptools builds in the source folder: take away the build/ it leaves, not one a
    # developer had.
    scratch = [src / "build" for src in sources if not (src / "build").exists()]
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation"]
        + ["--wheel-dir", str(partial), *map(str, sources)],
        capture_output=True,
        text=True,
    )
    for folder_made in scratch:
        shutil.rmtree(folder_made, ignore_errors=True)
    if done.returncode != 0:
        raise RuntimeError(f"building the kit's wheels failed: {done.stderr.strip()[-800:]}")
    partial.rename(folder)
    return folder
