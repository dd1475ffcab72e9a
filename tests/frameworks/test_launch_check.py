"""The node side of the argument check (``launch_check.py``): each launch checked by its
framework's own parser in the launch's own runtime, before bring-up stages weights."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pocforge.cluster.workload import check_plans
from pocforge.frameworks import launch_check
from pocforge.frameworks.argcheck import SCRIPTS
from pocforge.frameworks.launch_plan import NodeLaunch
from pocforge.spec import load_spec

from ..conftest import REPO

CHECKER = Path(launch_check.__file__)


def plans(poc: str) -> dict[str, list[dict]]:
    return check_plans(load_spec(REPO / "pocs" / poc / "poc.yaml"))


def test_every_node_gets_its_launches_with_their_framework_check():
    found = plans("llama-3.1-70b-bf16-mi300x-vllm")
    (launch,) = found["0"]
    assert launch["check"]["script"] == "vllm_args"
    assert "--tensor-parallel-size" in launch["check"]["item"]
    megatron = plans("llama-3.1-70b-fp8-mi355x-megatron")
    assert sorted(megatron) == ["0", "1"]
    assert megatron["1"][0]["check"]["item"]["world_size"] == 16


def test_a_container_launch_is_checked_in_its_own_image_and_mounts():
    (launch,) = plans("llama-3.1-70b-bf16-mi300x-vllm")["0"]
    one = NodeLaunch.from_dict(launch)
    command = launch_check.check_command(one, Path("/opt/pocforge/check/argcheck"), "vllm_args")
    image = one.runtime["image"]
    assert command[:3] == ["docker", "run", "-i"]
    assert command[command.index(image) :] == [image, "python3", "/opt/pocforge/check/argcheck/vllm_args.py"]  # fmt: skip
    assert (
        "/dev/kfd" in command
        and "/opt/pocforge/check/argcheck:/opt/pocforge/check/argcheck:ro" in command
    )
    assert command[command.index("--name") + 1].endswith("-server-0-check")


def node_checks(folder: Path, launches: list[dict]) -> subprocess.CompletedProcess:
    """``launch_check.py`` on ``launches`` laid out as the role lays them out on a node."""
    (folder / "argcheck").symlink_to(SCRIPTS)
    (folder / "check.json").write_text(json.dumps({"launches": launches}))
    command = [sys.executable, str(CHECKER), str(folder / "check.json")]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


@pytest.mark.budget(120, "vLLM's and DeepSpeed's own parsers, each imported once")
def test_the_frameworks_own_parser_rejects_a_typo_on_the_node(tmp_path):
    """The tiny 2-node vLLM POC's node 0 as bring-up hands it over: its vLLM server with
    a misspelt flag is rejected in vLLM's words; its DeepSpeed trainer is accepted."""
    launches = plans("tiny-llama-2node-fp32-cpu-vllm")["0"]
    server = next(one for one in launches if one["framework"] == "vllm")
    server["check"]["item"] += ["--max-num-seqz", "8"]
    done = node_checks(tmp_path, launches)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert any(
        line.startswith("vllm server on node 0: rejected:") and "--max-num-seqz" in line
        for line in lines
    ), lines
    assert "deepspeed trainer on node 0: accepted: by deepspeed_config" in lines


def test_a_launch_the_checker_cannot_ask_about_is_said_not_failed(tmp_path):
    """An argcheck script that cannot run in the launch's runtime (here: a framework the
    interpreter lacks) leaves the launch unchecked, said, and bring-up goes on."""
    (launch,) = [
        one for one in plans("tiny-llama-2node-fp32-cpu-vllm")["0"] if one["framework"] == "vllm"
    ]
    launch["argv"][0] = "/usr/bin/python3"  # an interpreter without vLLM
    done = node_checks(tmp_path, [launch])
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("vllm server on node 0: unchecked: vllm_args could not run there")


def test_a_megatron_entry_its_image_lacks_is_rejected_before_weights(tmp_path):
    """A Megatron launch names a script in the image's checkout; a node whose runtime does
    not have it is refused with the field to set, and a checkout that is there is judged
    (here by Megatron-Core: the tiny checkout holds no Megatron-LM parser)."""
    (launch,) = plans("llama-3.1-70b-fp8-mi355x-megatron")["0"]
    launch["runtime"] = {"kind": "venv", "python": sys.executable}  # no ROCm image here
    entry = "/workspace/Primus/third_party/Megatron-LM/pretrain_gpt.py"
    assert launch["check"]["item"]["entry"] == entry
    (tmp_path / "missing").mkdir()
    done = node_checks(tmp_path / "missing", [launch])
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.strip() == (
        f"megatron trainer on node 0: rejected: {entry} is not in this runtime: set "
        "training.megatron.path to where its image keeps the checkout"
    )
    checkout = tmp_path / "Megatron-LM"
    checkout.mkdir()
    (checkout / "pretrain_gpt.py").write_text("")
    launch["check"]["item"].update(entry=str(checkout / "pretrain_gpt.py"), checkout=str(checkout))
    (tmp_path / "present").mkdir()
    done = node_checks(tmp_path / "present", [launch])
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "megatron trainer on node 0: accepted: by megatron_args"
