"""The version a POC declares is the version its nodes run: the image catalog's, the kit's
own environment's, or bring-up's venv (which installs the declared one); a mismatch or a
missing declaration is a one-line problem with the fix, what cannot be known is a note."""

from __future__ import annotations

import pytest

from pocforge.paths import pocs_dir
from pocforge.runtimes import resolve
from pocforge.runtimes.resolve import catalog_version, default_images
from pocforge.runtimes.versions import running_version, version_problems
from pocforge.spec import load_poc
from pocforge.versions import kit_framework_version


def with_version(spec, deployment: str, version: str | None, **runtime):
    section = getattr(spec, deployment)
    update = {"version": version}
    if runtime:
        update["runtime"] = section.runtime.model_copy(update=runtime)
    return spec.model_copy(update={deployment: section.model_copy(update=update)})


def test_every_example_poc_declares_what_its_nodes_run():
    for folder in sorted(pocs_dir().iterdir()):
        if (folder / "poc.yaml").is_file():
            spec = load_poc(folder.name)
            assert version_problems(spec)[0] == [], folder.name


def test_every_catalog_image_records_its_version_or_says_it_cannot():
    images = [
        e for vendors in default_images().values() for v in vendors.values() for e in v.values()
    ]
    assert images and all(set(e) - {"checkouts"} == {"image", "version"} for e in images)
    assert catalog_version("vllm/vllm-openai-rocm:v0.27.1") == (True, "0.27.1")
    assert catalog_version("rocm/vllm:rocm7.0.0_vllm_0.11.2_20251210") == (False, None)  # moved on
    assert catalog_version("docker.io/rocm/primus:v26.9") == (True, None)
    assert catalog_version("example.com/mine:1") == (False, None)


def test_a_declared_version_other_than_the_images_is_refused_with_the_fix():
    spec = with_version(load_poc("llama-3.1-70b-bf16-mi300x-vllm"), "serving", "0.32.0")
    (problem,) = version_problems(spec)[0]
    assert problem == (
        "serving.version: '0.32.0', but the nodes run vllm 0.27.1 (image "
        "vllm/vllm-openai-rocm:v0.27.1): set serving.version: '0.27.1', or "
        "serving.runtime.image to an image of vllm 0.32.0"
    )
    unset = with_version(load_poc("llama-3.1-70b-bf16-mi300x-vllm"), "serving", None)
    assert version_problems(unset)[0] == [
        "serving.version: not set, and the nodes run vllm 0.27.1 (image "
        "vllm/vllm-openai-rocm:v0.27.1): set serving.version: '0.27.1'"
    ]


def test_what_cannot_be_known_is_a_note_not_a_pass():
    mine = with_version(load_poc("llama-3.1-70b-bf16-mi300x-vllm"), "serving", "0.32.0",
                        image="registry.example.com/vllm:custom")  # fmt: skip
    problems, notes = version_problems(mine)
    assert problems == []
    assert notes == [
        "llama-3.1-70b-bf16-mi300x-vllm: serving.version not checked: the nodes run image "
        "registry.example.com/vllm:custom, not in the kit's catalog"
    ]
    deepspeed = load_poc("llama-3-8b-bf16-mi300x-deepspeed")  # bring-up's venv installs it
    assert running_version(resolve(deepspeed, "training")) is None
    own = with_version(deepspeed, "training", "0.19.8", python="/opt/conda/bin/python")
    assert version_problems(own)[1] == [
        "llama-3-8b-bf16-mi300x-deepspeed: training.version not checked: the nodes run the "
        "nodes' own interpreter /opt/conda/bin/python"
    ]


@pytest.mark.parametrize(
    "poc, framework", [("demo", "vllm"), ("tiny-llama-fp32-cpu-megatron", "megatron")]
)
def test_the_kit_runtime_runs_what_its_environment_has(poc, framework):
    env, dist, installed = kit_framework_version(framework)
    spec = load_poc(poc)
    deployment = "serving" if spec.serving and spec.serving.framework == framework else "training"
    assert version_problems(spec)[0] == []
    wrong = with_version(spec, deployment, "0.0.1")
    (problem,) = version_problems(wrong)[0]
    assert (
        f"the nodes run {framework} {installed} (the kit's {env} ({dist} {installed}))" in problem
    )
