"""The two distributions: ``pocforge`` (common/pocforge) and ``pocforge-kernels``
(kernels/pocforge_kernels), both editable in .venv, and the kernels installable alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO

pytestmark = pytest.mark.process

PROBE = """
import importlib.util, json, pocforge, pocforge_kernels
print(json.dumps({
    "pocforge": pocforge.__file__,
    "kernels": pocforge_kernels.__file__,
    "common_top": importlib.util.find_spec("common") is not None,
    "kernels_top": importlib.util.find_spec("kernels") is not None,
}))
"""


def test_the_path_is_the_import_name(tmp_path):
    """From an unrelated folder, each package imports from the folder of its own name."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    found = json.loads(out.stdout)
    assert found["pocforge"] == str(REPO / "common" / "pocforge" / "__init__.py")
    assert found["kernels"] == str(REPO / "kernels" / "pocforge_kernels" / "__init__.py")
    assert not found["common_top"] and not found["kernels_top"]


def test_console_script_is_installed():
    for dist, folder in (("pocforge", "common"), ("pocforge-kernels", "kernels")):
        out = subprocess.run(
            [sys.executable, "-m", "pip", "show", dist], capture_output=True, text=True, check=True
        )
        assert "Editable project location: " + str(REPO / folder) in out.stdout
    script = subprocess.run(
        [str(REPO / ".venv" / "bin" / "pocforge"), "--version"], capture_output=True, text=True
    )
    assert script.returncode == 0 and "pocforge, version" in script.stdout


def test_importing_the_kit_pulls_in_no_framework(tmp_path):
    """validate/plan/report run on a laptop: the CLI must not import torch, vllm or triton."""
    code = "import sys, pocforge.cli, pocforge.spec, pocforge.catalog; print(sorted(m for m in ('torch','vllm','triton','deepspeed','sglang') if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


# torch, triton and pyyaml with what torch imports (numpy for the Triton interpreter on a
# CPU) and setuptools to build the wheel:
# exactly what a framework's environment on a GPU node has before the kernels go in.
NEEDS = (
    "torch",
    "triton",
    "yaml",
    "_yaml",
    "typing_extensions",
    "sympy",
    "mpmath",
    "networkx",
    "jinja2",
    "markupsafe",
    "fsspec",
    "filelock",
    "setuptools",
    "wheel",
    "_distutils_hack",
    "pkg_resources",
    "functorch",
    "torchgen",
    "numpy",
)

STANDALONE = """
import importlib.metadata as md, json, os, sys
import pocforge_kernels, torch
try:
    import pocforge
    kit = pocforge.__file__
except ImportError:
    kit = None
(plugin,) = [e for e in md.entry_points(group="vllm.general_plugins") if e.name == "pocforge_kernels"]
register = plugin.load()
register()  # no POCFORGE_VLLM_KERNELS: a no-op, as in a vLLM process that names no op
(sg,) = [e for e in md.entry_points(group="sglang.srt.plugins") if e.name == "pocforge_kernels"]
rms_norm = pocforge_kernels.load("rms_norm")
from pocforge_kernels.rms_norm.ref import rms_norm as rms_norm_ref
x, w = torch.randn(5, 123), torch.randn(123)
err = float((rms_norm(x, w, 1e-6) - rms_norm_ref(x, w, 1e-6)).abs().max())
print(json.dumps({"kernels": pocforge_kernels.__file__, "kit": kit, "plugin": plugin.value,
                  "sglang_plugin": sg.value, "dist": str(md.distribution("pocforge-kernels")._path),
                  "err": err}))
"""


@pytest.mark.slow
def test_kernels_install_alone_into_a_fresh_environment(tmp_path):
    """A wheel of kernels/ goes into a bare interpreter that has only torch, triton and
    pyyaml: the kernels import without the kit, both plugin entry points are found, and a
    kernel (interpreted) matches its reference."""
    import site

    site_packages = Path(site.getsitepackages()[0])
    deps = tmp_path / "deps"
    deps.mkdir()
    for entry in site_packages.iterdir():
        name = entry.name.split("-")[0].removesuffix(".py").lower()
        if name in NEEDS or entry.name.lower().startswith(("pyyaml-", "typing_extensions")):
            (deps / entry.name).symlink_to(entry)
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--no-compile",
            "--target",
            str(target),
            str(REPO / "kernels"),
        ],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "POCFORGE_"))}
    env |= {"PYTHONPATH": f"{target}{os.pathsep}{deps}", "TRITON_INTERPRET": "1"}
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", STANDALONE],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["kernels"].startswith(str(target)) and found["dist"].startswith(str(target))
    assert found["kit"] is None
    assert found["plugin"] == "pocforge_kernels.integrations.vllm_plugin:register"
    assert found["sglang_plugin"] == "pocforge_kernels.integrations.sglang_hook:register"
    assert found["err"] < 1e-5
