"""devices.yaml has one reader, pocforge_kernels.devices, which loads no torch or triton."""

import subprocess
import sys
from dataclasses import asdict

from pocforge_kernels import devices


def test_importing_devices_imports_neither_torch_nor_triton():
    code = (
        "import sys, pocforge_kernels, pocforge_kernels.devices as d\n"
        "d.gpus(); d.archs()\n"
        "assert not {'torch', 'triton'} & set(sys.modules), sorted(sys.modules)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_every_gpu_names_a_known_arch():
    archs = devices.archs()
    assert list(archs) == ["gfx942", "gfx950", "sm90", "sm100"]
    for gpu in devices.gpus().values():
        if gpu.is_gpu:
            assert archs[gpu.arch].vendor == gpu.vendor, gpu
        else:
            assert gpu.arch == "cpu", gpu


def test_shared_memory_limits():
    """CDNA3 64 KiB and CDNA4 160 KiB of LDS; 227 KB per block on Hopper and Blackwell."""
    limits = {name: arch.shared_bytes for name, arch in devices.archs().items()}
    assert limits == {"gfx942": 65536, "gfx950": 163840, "sm90": 232448, "sm100": 232448}
    assert {a.warp_size for a in devices.archs().values() if a.vendor == "amd"} == {64}


def test_the_kits_catalog_is_these_facts():
    """pocforge.catalog validates the same entries; it reads them only through devices."""
    from pocforge.catalog import gpu, gpu_names

    assert gpu_names() == list(devices.gpus())
    for name, facts in devices.gpus().items():
        assert gpu(name).model_dump() == asdict(facts)
        assert gpu(name).is_gpu == facts.is_gpu
