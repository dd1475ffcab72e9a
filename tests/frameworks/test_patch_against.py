"""``pocforge patch status POC --against FRAMEWORK==VERSION``: a POC's vLLM patches, pinned
to 0.32.0, judged on vLLM 0.33.0's real source (its sdist from the package index, fetched
once into .artifacts/releases): the demo patch still applies; a customer's line 0.33.0
rewrote conflicts; a change vLLM made itself between the two releases is already upstream;
a hunk below lines 0.33.0 inserted applies at an offset (tests/data/README.md: patches)."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from pocforge.cli import main

from ..conftest import REPO

pytestmark = pytest.mark.process  # the package index, over the network

DATA = REPO / "tests" / "data" / "patches" / "vllm"
DEMO = REPO / "pocs" / "demo"


@pytest.fixture
def poc(tmp_path):
    folder = tmp_path / "demo"
    shutil.copytree(DEMO, folder)
    for patch in sorted(DATA.glob("*.patch")):
        shutil.copy(patch, folder / "patches" / "vllm" / patch.name)
    return folder


def status(poc, *args):
    return CliRunner().invoke(main, ["patch", "status", str(poc), *args])


def test_each_patch_is_judged_on_a_later_release(poc):
    done = status(poc, "--against", "vllm==0.33.0")
    rows = dict(line.split(": ", 1) for line in done.stdout.splitlines())
    assert rows["vllm/0001-collect-env-marker.patch"] == "applies cleanly on vllm 0.33.0"
    assert rows["vllm/0002-acme-audio-asset.patch"] == (
        "conflicts on vllm 0.33.0 (vllm/assets/audio.py hunk #1 at line 14)"
    )
    assert rows["vllm/0003-minicpm-ocr-template.patch"] == (
        "already upstream on vllm 0.33.0 (the reverse applies cleanly)"
    )
    assert rows["vllm/0004-kv-events-queue.patch"] == (
        "applies with offsets or fuzz on vllm 0.33.0 (1 hunk(s) moved)"
    )
    assert done.exit_code == 1  # a conflict, as the other patch verbs refuse one


def test_on_the_release_they_are_pinned_to_every_patch_applies(poc):
    done = status(poc, "--against", "vllm==0.32.0", "--json")
    assert done.exit_code == 0, done.output
    judged = json.loads(done.stdout)["patches"]
    assert [one["verdict"] for one in judged] == ["applies"] * 4
    assert {one["pinned"] for one in judged} == {"0.32.0"}


def test_json_names_the_conflicting_hunks_for_ci(poc):
    done = status(poc, "--against", "vllm==0.33.0", "--json")
    (conflict,) = [
        one for one in json.loads(done.stdout)["patches"] if one["verdict"] == "conflicts"
    ]
    assert conflict["hunks"] == ["vllm/assets/audio.py hunk #1 at line 14"]


@pytest.mark.parametrize(
    ("against", "said"),
    [
        ("vllm-0.33.0", "expected FRAMEWORK==VERSION (vllm==0.33.0) or latest"),
        ("vllm==9.9.9", "vllm==9.9.9: the package index has no such release"),
        ("sglang==0.5.22", "the POC has no sglang patches (it has: vllm)"),
    ],
)
def test_a_release_that_cannot_be_judged_is_one_line_exit_2(poc, against, said):
    done = status(poc, "--against", against)
    assert done.exit_code == 2 and said in done.output and "Traceback" not in done.output


def test_rebase_moves_what_still_applies_and_refuses_the_rest_by_name(poc):
    """--to vllm==0.33.0: the demo patch and the offset one are rewritten against 0.33.0 and
    pinned to it (the old files kept beside them), and then apply cleanly there; the
    conflicting one is refused naming its hunk, the upstream one left and said; exit 1."""
    folder = poc / "patches" / "vllm"
    before = {p.name: p.read_bytes() for p in folder.glob("*.patch")}
    done = CliRunner().invoke(main, ["patch", "rebase", str(poc), "--to", "vllm==0.33.0"])
    assert done.exit_code == 1, done.output
    said = dict(
        line.split(": ", 1) for line in done.stdout.splitlines() if line.startswith("vllm/")
    )
    assert said["vllm/0002-acme-audio-asset.patch"] == (
        "refused: conflicts on vllm 0.33.0 (vllm/assets/audio.py hunk #1 at line 14)"
    )
    assert said["vllm/0003-minicpm-ocr-template.patch"].startswith("not rebased: already upstream")
    for name in ("0001-collect-env-marker.patch", "0004-kv-events-queue.patch"):
        assert said[f"vllm/{name}"].startswith("rebased onto vllm 0.33.0 (was 0.32.0")
        assert (folder / f"{name}.pinned-0.32.0").read_bytes() == before[name]
        assert (
            (folder / name)
            .read_text()
            .startswith("# pocforge-patch: framework=vllm version=0.33.0\n")
        )
    for name in ("0002-acme-audio-asset.patch", "0003-minicpm-ocr-template.patch"):
        assert (folder / name).read_bytes() == before[name]  # left as they were
    judged = json.loads(status(poc, "--against", "vllm==0.33.0", "--json").stdout)["patches"]
    verdicts = {one["patch"]: one["verdict"] for one in judged}
    assert verdicts["vllm/0004-kv-events-queue.patch"] == "applies"  # no offset any more
    assert verdicts["vllm/0001-collect-env-marker.patch"] == "applies"


def test_sglang_patches_are_judged_on_its_wheel(tmp_path):
    """SGLang ships wheels only: 0.5.23's holds the same Python files. A customer's default
    still applies there; SGLang's own fix between 0.5.22 and 0.5.23 is already upstream."""
    folder = tmp_path / "demo"
    shutil.copytree(DEMO, folder)
    shutil.copytree(REPO / "tests" / "data" / "patches" / "sglang", folder / "patches" / "sglang")
    done = status(folder, "--against", "sglang==0.5.23")
    assert done.exit_code == 0, done.output
    assert done.stdout.splitlines() == [
        "sglang/0001-ollama-no-stream-default.patch: applies cleanly on sglang 0.5.23",
        "sglang/0002-ollama-template-ids.patch: already upstream on sglang 0.5.23 "
        "(the reverse applies cleanly)",
    ]
