"""The frameworks' environment of a CPU node, as an archive bring-up unpacks on each node.

A GPU node gets its framework from an image or a venv bring-up builds; a rehearsal node
(``cluster.gpu: cpu``) gets it the same way: a virtual environment made with the node's own
Python (Debian's ``/usr/bin/python3``, which every rehearsal node has as part of its OS) at
the path it has on the nodes, :data:`NODE_VENV`, from the pinned ``requirements/cpu-node.txt``
(the same pins as the kit's ``.venv``), packed into a zstd tar the runtime names as its
``venv_archive``. Bring-up copies it to each node and unpacks it there (the ``python_env``
role), then installs the kit's wheels into it, as on a GPU node. Never the controller's
``.venv``, whose interpreter the nodes cannot see.

Built once per machine and kept (like the tiny model) in ``.artifacts/node-env/<digest>``,
the digest of the requirement file and the node Python's version: a second build is a
lookup. The venv is made at its node path inside a mount namespace of its own, where a
scratch folder is bound at :data:`NODE_VENV`; the controller's ``/opt`` gains only the empty
mount point.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from pocforge.paths import extensions_dir, kit_root, workspace_root

NODE_PYTHON = "/usr/bin/python3"
NODE_VENV = "/opt/pocforge/venvs/cpu"
REQUIREMENTS = "requirements/cpu-node.txt"
# Installed after the pins, without their declared dependencies (which would replace the
# CPU torch), as the kit's setup does for .venv.
NO_DEPS = "requirements/cpu-nodeps.txt"
# The registry's builds of these break transformers' imports next to a CPU torch (setup.sh
# removes them from .venv too).
REMOVED = ("torchvision", "torchaudio", "torchcodec")
COMPILE_COMM_OP = (
    "from deepspeed.ops.op_builder.cpu import ShareMemCommBuilder; ShareMemCommBuilder().load()"
)


class NodeEnvError(RuntimeError):
    """The node environment could not be built (one line: what failed and what to do)."""


def _node_python_version() -> str:
    done = subprocess.run(
        [NODE_PYTHON, "-c", "import sys; print(sys.version.split()[0])"],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise NodeEnvError(f"{NODE_PYTHON} does not run (apt-get install python3 python3-venv)")
    return done.stdout.strip()


def digest() -> str:
    """What the environment is made from: the requirement files and the node Python."""
    h = hashlib.sha256(_node_python_version().encode())
    for name in (REQUIREMENTS, NO_DEPS):
        h.update((kit_root() / name).read_bytes())
    return h.hexdigest()[:16]


def archive_path() -> Path:
    return workspace_root() / ".artifacts" / "node-env" / digest() / "cpu-venv.tar.zst"


def _build_script(stage: Path) -> str:
    pip = f"{NODE_VENV}/bin/python -m pip"
    quiet = "--quiet --disable-pip-version-check"
    return " && ".join(
        [
            f"mkdir -p {NODE_VENV}",
            f"mount --bind {stage} {NODE_VENV}",
            f"{NODE_PYTHON} -m venv {NODE_VENV}",
            f"{pip} install {quiet} -r {kit_root() / REQUIREMENTS}",
            f"{pip} install {quiet} --no-deps -r {kit_root() / NO_DEPS}",
            f"{pip} uninstall {quiet} -y {' '.join(REMOVED)}",
            # DeepSpeed's CPU comm op, compiled into the environment that runs it (a node
            # may have no compiler: a container image has none)
            f"DS_ACCELERATOR=cpu TORCH_EXTENSIONS_DIR={extensions_dir(NODE_VENV + '/bin/python')} "
            f"{NODE_VENV}/bin/python -c '{COMPILE_COMM_OP}'",
            # torch's bundled libraries and vLLM find their own files relative to the
            # environment: nothing in it may point back at the stage folder
            f"! grep -rIl --include=*.py --include=*.cfg --include=*.pth {stage} {NODE_VENV}",
        ]
    )


def build() -> Path:
    """The archive of the node environment, built here unless it is there; its path."""
    archive = archive_path()
    if archive.is_file():
        return archive
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        raise NodeEnvError("building the node environment needs root and unshare (util-linux)")
    folder = archive.parent
    stage = folder / "stage"
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    print(f"building the CPU nodes' environment at {NODE_VENV} (once per machine; minutes)")
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-ec", _build_script(stage)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise NodeEnvError(f"node environment: {(done.stderr or done.stdout)[-600:].strip()}")
    partial = archive.with_name(archive.name + ".partial")
    # zstd: a quarter of the size (3.3 GiB -> 0.85 GiB) for 10 s here, once; GNU tar on
    # the node recognises it
    subprocess.run(
        ["tar", "-C", str(stage), "-I", "zstd -q -T0 -3", "-cf", str(partial), "."], check=True
    )
    partial.rename(archive)
    shutil.rmtree(stage, ignore_errors=True)
    return archive


def main() -> int:
    """``python -m pocforge.rehearse.node_env`` (``make rehearsal-image`` builds it too)."""
    try:
        path = build()
    except NodeEnvError as exc:
        print(f"node environment: {exc}", file=sys.stderr)
        return 1
    print(f"{path} ({path.stat().st_size / 2**30:.2f} GiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
