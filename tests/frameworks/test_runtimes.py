"""Runtimes: defaults per GPU vendor and framework, and the errors a wrong one gets."""

from __future__ import annotations

import pytest

from pocforge.frameworks import LaunchContext
from pocforge.runtimes import RuntimeSpecError, plan_nodes, resolve
from pocforge.spec import load_spec

from ..conftest import REPO

POCS = REPO / "pocs"


def _spec(name: str, **runtime):
    spec = load_spec(POCS / name / "poc.yaml")
    section = spec.serving or spec.training
    section.runtime = section.runtime.model_copy(update=runtime)
    return spec


def test_defaults_by_vendor_and_framework():
    """GPU serving runs in the vendor's container, DeepSpeed in a bring-up venv, cpu in the kit."""
    vllm = resolve(_spec("llama-3.1-70b-bf16-mi300x-vllm"), "serving")
    assert (vllm.kind, vllm.vendor, vllm.node_python) == ("container", "amd", "python3")
    ds = resolve(_spec("llama-3-8b-bf16-mi300x-deepspeed"), "training")
    assert (ds.kind, ds.node_python) == ("venv", "/opt/pocforge/venvs/deepspeed/bin/python")
    assert resolve(load_spec(POCS / "demo" / "poc.yaml"), "serving").kind == "kit"


def test_a_customer_image_and_engine_are_used_as_given():
    spec = _spec(
        "llama-3.1-70b-bf16-mi300x-vllm", image="registry.customer/vllm:7", engine="podman"
    )
    (launch,) = plan_nodes(spec, LaunchContext(repo=REPO))
    assert launch.argv[:2] == ["podman", "run"] and "registry.customer/vllm:7" in launch.argv


@pytest.mark.parametrize(
    ("name", "update", "message"),
    [
        (
            "llama-3.1-70b-bf16-mi300x-vllm",
            {"kind": "kit"},
            r"serving\.runtime\.kind: kit .* cpu only",
        ),
        (
            "llama-3-8b-bf16-mi300x-deepspeed",
            {"kind": "container"},
            r"training\.runtime\.image: the kit has no default deepspeed image",
        ),
    ],
)
def test_impossible_runtimes_are_refused_naming_the_field(name, update, message):
    with pytest.raises(RuntimeSpecError, match=message):
        plan_nodes(_spec(name, **update), LaunchContext(repo=REPO))


def test_a_venv_interpreter_the_customer_names_starts_the_framework():
    spec = _spec(
        "llama-3.1-70b-bf16-mi300x-vllm", kind="venv", python="/shared/envs/vllm/bin/python"
    )
    (launch,) = plan_nodes(spec, LaunchContext(repo=REPO))
    assert launch.argv[0] == "/shared/envs/vllm/bin/python" and launch.runtime["kind"] == "venv"
