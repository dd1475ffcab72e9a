"""A POC's framework patches where the nodes run the framework: the controller applies them
to the release the nodes run (vLLM 0.32.0's source from the package index, cached in
.artifacts/releases) and each serving launch carries the overlay that serves the patched
modules, checked against the release byte for byte in the framework's own interpreter; the
parity baseline's launches carry none."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from pocforge.cli import main
from pocforge.frameworks import LaunchContext
from pocforge.frameworks.patching.files import PatchError
from pocforge.frameworks.patching.on_nodes import FOLDER, MAP_FILE, node_overlay
from pocforge.runtimes.plan import plan_deployment
from pocforge.spec import load_spec

from ..conftest import REPO

pytestmark = pytest.mark.process  # the package index; the framework's interpreter

CACHE = REPO / ".artifacts" / "releases"
PYTHON = REPO / ".venv" / "bin" / "python"
INSTALLED = REPO / ".venv" / "lib" / "python3.11" / "site-packages"
SAID = "pocforge: vllm 0.32.0 patches applied: vllm/0001-collect-env-marker.patch (vllm/collect_env.py)"


@pytest.fixture(scope="module")
def overlay():
    return node_overlay(load_spec(REPO / "pocs" / "demo" / "poc.yaml"), CACHE)


def written(overlay, folder: Path) -> Path:
    for name, text in overlay.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder / FOLDER


def test_the_demo_patch_is_made_on_the_release_the_nodes_run(overlay):
    plan = json.loads(overlay[f"{FOLDER}/{MAP_FILE}"])
    assert (plan["framework"], plan["version"], plan["patches"]) == (
        "vllm",
        "0.32.0",
        ["vllm/0001-collect-env-marker.patch"],
    )
    entry = plan["modules"]["vllm.collect_env"]
    released = (CACHE / "vllm-0.32.0" / "vllm-0.32.0" / "vllm" / "collect_env.py").read_bytes()
    patched = overlay[f"{FOLDER}/{entry['code']}"]
    assert entry["released"] == hashlib.sha256(released).hexdigest()
    assert entry["patched"] == hashlib.sha256(patched.encode()).hexdigest()
    assert 'POCFORGE_DEMO_PATCH = "demo/0001"' in patched
    assert 'POCFORGE_DEMO_PATCH = "demo/0001"' not in released.decode()


def run(folder: Path, code: str, *path: Path) -> subprocess.CompletedProcess:
    pythonpath = ":".join(str(p) for p in (folder, *path))
    return subprocess.run(
        [str(PYTHON), "-c", code],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": pythonpath, "PATH": "/usr/bin:/bin"},
        timeout=120,
    )


def test_the_framework_interpreter_imports_the_patched_module_and_says_so_once(overlay, tmp_path):
    """vLLM 0.32.0 as installed here (its collect_env.py is the release's, byte for byte):
    the module has the patch's constant and keeps its installed __file__; a child process
    (a server's engine) is patched too and does not say it again."""
    folder = written(overlay, tmp_path)
    code = (
        "import subprocess, sys, vllm.collect_env as c; print(c.POCFORGE_DEMO_PATCH, c.__file__, flush=True);"
        "subprocess.run([sys.executable, '-c', "
        "'import vllm.collect_env as c; print(c.POCFORGE_DEMO_PATCH)'], check=True)"
    )
    done = run(folder, code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        "demo/0001",
        str(INSTALLED / "vllm" / "collect_env.py"),
        "demo/0001",
    ]
    assert done.stderr.count(SAID) == 1


def test_a_framework_file_not_the_release_stops_the_process_naming_it(overlay, tmp_path):
    """A vendor's build whose collect_env.py differs from the release: nothing of the
    framework runs, and the one line names the file (exit 78)."""
    folder = written(overlay, tmp_path / "overlay")
    vendor = tmp_path / "vendor" / "vllm"
    vendor.mkdir(parents=True)
    (vendor / "__init__.py").write_text("")
    text = (INSTALLED / "vllm" / "collect_env.py").read_text()
    (vendor / "collect_env.py").write_text(text + "# a vendor's line\n")
    done = run(folder, "import vllm.collect_env", vendor.parent)
    assert done.returncode == 78
    assert done.stderr.strip().startswith(
        "pocforge: the POC's vllm patches are not applied, and this process stops: "
        f"{vendor / 'collect_env.py'} is not vllm 0.32.0's as released (SHA-256 "
    )
    # already patched in place (pocforge patch apply on the node's framework): it runs, and
    # the module is the installed file, with no overlay loader
    (vendor / "collect_env.py").write_text(overlay[f"{FOLDER}/modules/000.py"])
    find = (
        "import importlib.util as u; print(type(u.find_spec('vllm.collect_env').loader).__name__)"
    )
    done = run(folder, find, vendor.parent)
    assert done.returncode == 0 and done.stdout.strip() == "SourceFileLoader", done.stderr
    (vendor / "collect_env.py").write_text(text)  # as released: served from the overlay
    assert run(folder, find, vendor.parent).stdout.strip() == "_PatchedLoader"


def demo_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "demo"
    shutil.copytree(REPO / "pocs" / "demo", folder)
    return folder


def test_patches_that_cannot_run_on_the_nodes_are_refused_with_the_fix(tmp_path):
    folder = demo_copy(tmp_path)
    patch = folder / "patches" / "vllm" / "0001-collect-env-marker.patch"
    patch.write_text(patch.read_text().replace("version=0.32.0", "version=0.31.0", 1))
    with pytest.raises(PatchError, match=r"--to vllm==0\.32\.0`$"):
        node_overlay(load_spec(folder / "poc.yaml"), CACHE)
    patch.write_text(patch.read_text().replace("version=0.31.0", "version=0.32.0", 1))
    (folder / "patches" / "vllm" / "0002-data.patch").write_text(
        "# pocforge-patch: framework=vllm version=0.32.0\n# A data file.\n"
        "--- a/vllm/py.typed\n+++ b/vllm/py.typed\n@@ -0,0 +1 @@\n+x\n"
    )
    with pytest.raises(PatchError, match="vllm/py.typed is not a Python module"):
        node_overlay(load_spec(folder / "poc.yaml"), CACHE)


def test_the_serving_launches_carry_the_overlay_and_the_baseline_none():
    """Each launch that runs the framework carries the overlay first on its PYTHONPATH; the
    parity baseline's (patches=False) carry nothing of it; training is not patched."""
    spec = load_spec(REPO / "pocs" / "demo" / "poc.yaml")
    ctx = LaunchContext.local(REPO)
    (server,) = plan_deployment(spec, "serving", ctx)
    assert server.env["PYTHONPATH"] == f"{{workdir}}/{FOLDER}"
    assert f"{FOLDER}/{MAP_FILE}" in server.files
    (baseline,) = plan_deployment(spec, "serving", ctx, patches=False)
    assert "PYTHONPATH" not in baseline.env and not any(
        n.startswith(FOLDER) for n in baseline.files
    )
    for launch in plan_deployment(spec, "training", ctx):
        assert not any(n.startswith(FOLDER) for n in launch.files)


def test_launch_print_names_the_patches_the_node_runs():
    done = CliRunner().invoke(main, ["launch", "demo", "--print"])
    assert done.exit_code == 0, done.output
    assert "export PYTHONPATH=/opt/pocforge/run/pocforge-patched" in done.stdout
    assert f"--- {FOLDER}/modules/000.py (" in done.stdout  # its size, not its 1,000 lines
    assert '"vllm/0001-collect-env-marker.patch"' in done.stdout


def test_the_overlay_and_rocprofv3s_gate_both_run_in_either_order(overlay, tmp_path):
    """Python runs only the first sitecustomize on the path: each of the kit's runs the one
    it shadows, so a patched POC profiled with rocprofv3 runs patched, under the gate."""
    from pocforge.frameworks.gpu_profiler import GATE_SITE
    from pocforge.frameworks.site_files import sitecustomize

    folder = written(overlay, tmp_path)
    gate = tmp_path / "roctx-site"
    gate.mkdir()
    (gate / "sitecustomize.py").write_text(sitecustomize(GATE_SITE))
    code = (
        "import json, sys, vllm.collect_env as c;"
        "print(c.POCFORGE_DEMO_PATCH, json.dumps([type(f).__name__ for f in sys.meta_path]))"
    )
    for first, second in ((gate, folder), (folder, gate)):
        done = run(first, code, second)
        assert done.returncode == 0, done.stderr
        patch, finders = done.stdout.split(" ", 1)
        assert patch == "demo/0001" and SAID in done.stderr
        assert {"_AfterTorchCuda", "_PatchedFinder"} <= set(json.loads(finders))
