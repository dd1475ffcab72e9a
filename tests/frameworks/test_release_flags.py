"""A launch is held to the flags of the release its nodes run, read from that release's own
source on the package index (fetched once into .artifacts/releases, never imported): each
reader agrees with the framework's own parser on the release installed here, a flag vLLM
added after 0.11.2 is refused for a 0.11.2 image and accepted for 0.32.0, and what cannot be
read is said."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
import yaml
from click.testing import CliRunner

from pocforge.cli import main
from pocforge.frameworks import LaunchContext, plan_all
from pocforge.frameworks.release_flags import READERS, FlagsUnreadable, release_flags
from pocforge.spec import load_spec

from ..conftest import REPO

pytestmark = pytest.mark.process  # the package index, over the network; the parsers' imports

CACHE = REPO / ".artifacts" / "releases"

OWN_PARSER = {  # the option strings of the installed release's own parser, as it builds it
    "vllm": (
        ".venv",
        "from vllm.entrypoints.launchers.cli_args import make_arg_parser\n"
        "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
        "parser = make_arg_parser(FlexibleArgumentParser())\n",
    ),
    "sglang": (
        ".venv-sglang",
        "import argparse\nfrom sglang.srt.server_args import ServerArgs\n"
        "parser = argparse.ArgumentParser()\nServerArgs.add_cli_args(parser)\n",
    ),
}


@pytest.mark.parametrize(("framework", "version"), [("vllm", "0.32.0"), ("sglang", "0.5.23")])
def test_each_reader_finds_the_flags_the_release_own_parser_defines(framework, version):
    env, build = OWN_PARSER[framework]
    dump = build + (
        "import json\n"
        "print(json.dumps(sorted(s for s in parser._option_string_actions if s.startswith('--'))))"
    )
    done = subprocess.run(
        [str(REPO / env / "bin" / "python"), "-c", dump], capture_output=True, text=True, check=True
    )
    own = set(json.loads(done.stdout.splitlines()[-1]))
    read = release_flags(framework, version, CACHE)
    assert len(own) > 400  # the whole parser, not a part of it
    assert read.flags == own, (sorted(own - read.flags), sorted(read.flags - own))


def _variant(tmp_path, name: str, **serving) -> str:
    """The MI300X vLLM POC as ``name``, its serving section updated."""
    folder = tmp_path / name
    shutil.copytree(REPO / "pocs" / "llama-3.1-70b-bf16-mi300x-vllm", folder)
    doc = yaml.safe_load((folder / "poc.yaml").read_text())
    doc["poc"]["name"] = name
    for key, value in serving.items():
        if isinstance(value, dict) and isinstance(doc["serving"].get(key), dict):
            doc["serving"][key].update(value)
        else:
            doc["serving"][key] = value
    (folder / "poc.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return str(folder)


def test_a_flag_added_after_0_11_2_is_refused_for_its_image_and_accepted_for_0_32_0(tmp_path):
    """--attention-backend came after vLLM 0.11.2 (which chose its backend by environment
    variable); --swap-space went before 0.32.0. The MI300X POC on AMD's 0.11.2 image (the kit's
    default until it moved to 0.27.1) is held to 0.11.2's flags; on a 0.32.0 image, to the
    0.32.0 parser installed here."""
    flags = {"attention-backend": "ROCM_AITER_FA", "swap-space": 4}
    old = _variant(
        tmp_path,
        "on-0112",
        version="0.11.2",
        runtime={"image": "rocm/vllm:rocm7.0.0_vllm_0.11.2_20251210"},
        engine_args=flags,
    )
    new = _variant(
        tmp_path,
        "on-0320",
        version="0.32.0",
        runtime={"image": "registry.example.com/vllm-rocm:0.32.0"},
        engine_args=flags,
    )
    done = CliRunner().invoke(main, ["validate", old, new])
    assert done.exit_code == 2
    said = done.stderr.splitlines()
    refused = [line for line in said if "on-0112/poc.yaml" in line]
    assert refused == [
        f"{old}/poc.yaml: serving node 0 (server): vllm 0.11.2 has no --attention-backend (its "
        "released source defines no such flag): remove it, or run a release that has it "
        "(serving.version and the image of that release)"
    ]
    (only,) = [line for line in said if "on-0320/poc.yaml" in line]
    assert "unrecognized arguments: --swap-space" in only  # 0.32.0's own parser
    assert (
        "note: on-0112: vllm launches checked against vllm 0.11.2's flags, read from its released "
        "source (vllm/entrypoints/openai/cli_args.py and vllm/engine/arg_utils.py); their values "
        "are judged by vllm 0.11.2's own parser on each node at bring-up"
    ) in said


def test_a_release_whose_flags_cannot_be_read_is_said_not_passed(tmp_path):
    """A version the index does not have: validate passes the POC (its version is the
    image's, outside the catalog) and says its launches went unchecked, and why."""
    poc = _variant(
        tmp_path,
        "unknown-release",
        version="0.11.99",
        runtime={"image": "registry.example.com/vllm-rocm:0.11.99"},
    )
    done = CliRunner().invoke(main, ["validate", poc])
    assert done.exit_code == 0, done.output
    (note,) = [line for line in done.stderr.splitlines() if "could not be read" in line]
    assert note.startswith(
        "note: unknown-release: vllm 0.11.99's flags could not be read (vllm==0.11.99: the "
        "package index has no such release"
    )
    assert note.endswith(
        "its launches are not checked here; bring-up's launch check runs vllm 0.11.99's own "
        "parser on each node"
    )


@pytest.mark.parametrize("framework", sorted(READERS))
def test_a_layout_the_kit_does_not_read_is_refused(tmp_path, framework):
    (tmp_path / framework).mkdir()
    with pytest.raises(FlagsUnreadable):
        READERS[framework](tmp_path / framework)


def test_vllm_spellings_its_parser_takes():
    """FlexibleArgumentParser's underscores and dotted JSON keys, argparse's --flag=value and
    a bool field's --no- form are one flag each; a flag of no release is named as written."""
    defined = release_flags("vllm", "0.32.0", CACHE)
    argv = [
        "--max_num_seqs", "8", "--compilation-config.mode", "3", "--dtype=bfloat16",
        "--no-enable-prefix-caching", "--enforce-eager", "--no-such_flag=1",
    ]  # fmt: skip
    assert defined.unknown(argv) == ["--no-such_flag"]
    # a `bool | str | None` field takes an optional value, no --no- form (0.2x on); 0.11.2
    # named --hf-token's options by hand, alike
    assert "--hf-token" in defined.flags and "--no-hf-token" not in defined.flags


@pytest.mark.parametrize(
    ("version", "expected", "absent"),
    [("0.5.18", ["--dp-size", "--enable-dp-attention"], "--attn-dp-size"),
     ("0.5.23", ["--attn-dp-size"], "--enable-dp-attention")],
)  # fmt: skip
def test_sglang_dp_attention_in_each_release_own_words(version, expected, absent):
    """DeepSeek on 2 × 8 MI355X with DP attention: the flags the node's SGLang defines."""
    spec = load_spec(REPO / "pocs" / "deepseek-v3-fp8-mi355x-sglang" / "poc.yaml")
    spec = spec.model_copy(update={"serving": spec.serving.model_copy(update={"version": version})})
    defined = release_flags("sglang", version, CACHE)
    for launch in plan_all(spec, LaunchContext.local(REPO)):
        assert all(flag in launch.argv for flag in expected) and absent not in launch.argv
        assert defined.unknown(launch.check_args) == []
