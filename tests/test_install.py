"""The editable install exposes ``pocforge`` and ``pocforge_kernels`` and nothing else at top level."""

from __future__ import annotations

import subprocess
import sys

from .conftest import REPO

PROBE = """
import importlib.util, json, pocforge, pocforge_kernels
print(json.dumps({
    "pocforge": pocforge.__file__,
    "kernels": pocforge_kernels.__file__,
    "common_top": importlib.util.find_spec("common") is not None,
    "kernels_top": importlib.util.find_spec("kernels") is not None,
}))
"""


def test_package_roots_map_to_common_and_kernels(tmp_path):
    # Run from an unrelated folder so the checkout is not on sys.path by accident.
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    import json

    found = json.loads(out.stdout)
    assert found["pocforge"] == str(REPO / "common" / "__init__.py")
    assert found["kernels"] == str(REPO / "kernels" / "__init__.py")
    assert not found["common_top"] and not found["kernels_top"]


def test_console_script_is_installed():
    out = subprocess.run(
        [sys.executable, "-m", "pip", "show", "-f", "pocforge"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "Editable project location: " + str(REPO) in out.stdout
    script = subprocess.run(
        [str(REPO / ".venv" / "bin" / "pocforge"), "--version"], capture_output=True, text=True
    )
    assert script.returncode == 0 and "pocforge, version" in script.stdout


def test_importing_the_kit_pulls_in_no_framework(tmp_path):
    """validate/plan/report run on a laptop: the CLI must not import torch, vllm or triton."""
    code = "import sys, pocforge.cli, pocforge.spec; print(sorted(m for m in ('torch','vllm','triton','deepspeed','sglang') if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"
