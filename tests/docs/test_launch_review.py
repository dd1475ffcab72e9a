"""docs/launch-review.md against the golden plans, both ways: every flag, variable and
generated file that a launch of an example GPU POC carries has its row (what the kit sets it
from, and its public source), and every row is still carried by some launch."""

from __future__ import annotations

import json
import re
from collections import defaultdict

import pytest

from ..conftest import REPO

REVIEW = REPO / "docs" / "launch-review.md"
GOLDEN = REPO / "tests" / "frameworks" / "golden"
FRAMEWORK_SECTIONS = {
    "vllm": "vLLM",
    "sglang": "SGLang",
    "trtllm": "TensorRT-LLM",
    "megatron": "Megatron-LM",
    "deepspeed": None,  # the kit's driver: its launcher's flags and its files
}
ROUTER = "The kit's P/D router"
SHARED = ("Launchers", "Profilers")


def reviewed() -> dict[str, set[str]]:
    """Each section's rows: the backquoted name in a table row's first cell."""
    rows: dict[str, set[str]] = defaultdict(set)
    section = None
    for line in REVIEW.read_text().splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
        found = re.match(r"^\| `([^`]+)` \|", line)
        if found and section:
            rows[section].add(found.group(1))
    return rows


def gpu_goldens() -> list:
    return sorted(
        path for path in GOLDEN.glob("*.json") if not path.name.startswith(("tiny-", "demo"))
    )


def carried() -> dict[str, dict[str, set[str]]]:
    """Per section, each name a GPU POC's launches carry, with the plans that carry it."""
    out: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for path in gpu_goldens():
        for launch in json.loads(path.read_text()):
            runtime = launch.get("runtime") or {}
            argv = launch["argv"]
            if argv[0] == "srun":  # a Slurm job step: its flags, then what it runs
                cut = next(i for i, part in enumerate(argv[1:], 1) if not part.startswith("--"))
                for flag in argv[1:cut]:
                    out["Slurm"][flag.split("=", 1)[0]].add(path.name)
                argv = argv[cut:]
            inner = runtime.get("inner_argv") or argv
            if runtime.get("kind") == "container":
                for flag in argv[: argv.index(runtime["image"])]:
                    if flag.startswith("--"):
                        out["Container"][flag].add(path.name)
            for name in runtime.get("env") or launch.get("env") or {}:
                out["Environment"][name].add(path.name)
            for name in launch.get("files") or {}:
                out["Generated files"][name].add(path.name)
            router = "pocforge.frameworks.pd_router" in inner
            home = ROUTER if router else FRAMEWORK_SECTIONS[launch["framework"]]
            for part in inner:
                if part.startswith("--"):
                    out[f"{home}|{'|'.join(SHARED)}"][part.split("=", 1)[0]].add(path.name)
    return out


def test_the_review_covers_the_gpu_pocs():
    assert len(gpu_goldens()) >= 18  # 9 example GPU POCs, container and venv plans


def test_every_flag_variable_and_file_a_launch_carries_has_its_row():
    rows = reviewed()
    missing = []
    for sections, names in carried().items():
        allowed = set().union(*(rows[s] for s in sections.split("|") if s != "None"))
        for name, plans in names.items():
            if name not in allowed:
                missing.append(f"{name} ({sections.replace('|', ' or ')}; {sorted(plans)[0]})")
    assert not missing, "no row in docs/launch-review.md for: " + ", ".join(sorted(missing))


@pytest.mark.parametrize("section", ["Container", "Environment", "Generated files", *filter(None, FRAMEWORK_SECTIONS.values()), ROUTER, *SHARED])  # fmt: skip
def test_every_row_is_carried_by_some_launch(section):
    used: set[str] = set()
    for sections, names in carried().items():
        if section in sections.split("|"):
            used |= set(names)
    stale = sorted(reviewed()[section] - used)
    assert not stale, f"docs/launch-review.md, {section}: no GPU POC's launch carries {stale}"
