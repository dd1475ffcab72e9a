"""The dependency rules are import-linter contracts (pyproject.toml), checked by `make lint`:
the tree keeps them, and a forbidden edge breaks them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO

pytestmark = pytest.mark.process

LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint(root: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": f"{root / 'common'}{os.pathsep}{root / 'kernels'}"}
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(root / "pyproject.toml"), "--no-cache"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def tree_copy(tmp_path: Path) -> Path:
    """The two packages and the contracts, copied: the copy is what the linter reads."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO / "common" / "pocforge", tmp_path / "common" / "pocforge", ignore=ignore)
    shutil.copytree(
        REPO / "kernels" / "pocforge_kernels",
        tmp_path / "kernels" / "pocforge_kernels",
        ignore=ignore,
    )
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_tree_keeps_every_contract(tree_copy):
    out = _lint(tree_copy)
    assert out.returncode == 0, out.stdout[-3000:]
    assert "Contracts: 2 kept, 0 broken." in out.stdout


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        # The kernels distribution is installed on GPU nodes without the kit.
        (
            "kernels/pocforge_kernels/config.py",
            "import pocforge.spec",
            "pocforge_kernels never imports the kit",
        ),
        # The spec sits at the bottom; it may not reach up into the runner.
        (
            "common/pocforge/spec/rules.py",
            "import pocforge.runner",
            "pocforge.spec is not allowed to import pocforge.runner",
        ),
        # Stages report through results, not the other way round.
        (
            "common/pocforge/bench/records.py",
            "import pocforge.results.store",
            "pocforge.bench is not allowed to import pocforge.results",
        ),
    ],
)
def test_a_forbidden_import_breaks_a_contract(tree_copy, module, line, broken):
    path = tree_copy / module
    path.write_text(path.read_text() + f"\n{line}  # a wrong edge\n")
    out = _lint(tree_copy)
    assert out.returncode != 0
    assert "1 broken" in out.stdout and broken in " ".join(out.stdout.split()), out.stdout[-3000:]
