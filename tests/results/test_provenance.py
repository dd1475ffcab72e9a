"""Host facts report a GPU stack only where its driver or device is present."""

from __future__ import annotations

import pytest

from pocforge.results.provenance import _stacks


def _write(path, text: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_rocm_files_without_driver_are_not_a_stack(tmp_path):
    """/opt/rocm in a container without /dev/kfd: files, not ROCm in use."""
    _write(tmp_path / "opt/rocm/.info/version", "6.4.1-120\n")
    assert _stacks(tmp_path) == {
        "rocm-files": "6.4.1-120 in /opt/rocm; no amdgpu driver or /dev/kfd"
    }
    _write(tmp_path / "dev/kfd")
    assert _stacks(tmp_path) == {"rocm": "6.4.1-120"}


# /proc/driver/nvidia/version as captured on real hosts (sources in tests/data/README.md).
PROPRIETARY = (
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  384.98  Thu Oct 26 15:16:01 PDT 2017\n"
    "GCC version:  gcc version 7.2.0 (Ubuntu 7.2.0-8ubuntu3) \n"
)
OPEN_MODULE = (
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  565.57.01  Release Build  "
    "(dvs-builder@U16-A24-9-2)  Thu Oct 10 12:15:00 UTC 2024\n"
    "GCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04)\n"
)


@pytest.mark.parametrize(("text", "version"), [(PROPRIETARY, "384.98"), (OPEN_MODULE, "565.57.01")])
def test_nvidia_driver_version_from_proc_both_module_kinds(tmp_path, text, version):
    """The open kernel module (the default for Hopper and later) words its NVRM line
    differently; both give the version."""
    _write(tmp_path / "proc/driver/nvidia/version", text)
    assert _stacks(tmp_path) == {"nvidia": version}


def test_sys_module_version_wins(tmp_path):
    _write(tmp_path / "proc/driver/nvidia/version", OPEN_MODULE)
    _write(tmp_path / "sys/module/nvidia/version", "565.57.01\n")
    assert _stacks(tmp_path) == {"nvidia": "565.57.01"}


def test_nothing_on_a_bare_host(tmp_path):
    assert _stacks(tmp_path) == {}
