"""The POCs in pocs/ all validate and follow the naming convention."""

from __future__ import annotations

import re

import pytest

from pocforge.spec import load_spec

from ..conftest import REPO

POCS = sorted(p.parent.name for p in (REPO / "pocs").glob("*/poc.yaml"))


@pytest.mark.parametrize("name", POCS)
def test_every_poc_validates(name):
    spec = load_spec(REPO / "pocs" / name / "poc.yaml")
    assert spec.acceptance.criteria, "a POC without acceptance criteria proves nothing"


def test_the_expected_pocs_exist():
    assert {"_template", "demo"} <= set(POCS)
    gpu_pocs = [p for p in POCS if not p.startswith("_") and p != "demo"]
    assert len(gpu_pocs) >= 3


@pytest.mark.parametrize("name", [p for p in POCS if not p.startswith("_") and p != "demo"])
def test_gpu_pocs_are_named_model_precision_gpu_framework(name):
    spec = load_spec(REPO / "pocs" / name / "poc.yaml")
    framework = spec.serving.framework if spec.serving else spec.training.framework
    # a disaggregated deployment says so at the end: <...>-<framework>-pd; a cluster Slurm
    # owns after it: -slurm
    pd = "-pd" if spec.serving and spec.serving.disaggregation else ""
    pd += "-slurm" if spec.cluster.scheduler == "slurm" else ""
    pattern = rf"^[a-z0-9.\-]+-(bf16|fp8|fp16|fp32|int8|mxfp4)-{spec.cluster.gpu.lower()}-{framework}{pd}$"
    assert re.match(pattern, name), (
        f"{name} should read <model>-<precision>-{spec.cluster.gpu.lower()}-{framework}{pd}"
    )
    assert (REPO / "pocs" / name / "README.md").is_file()
