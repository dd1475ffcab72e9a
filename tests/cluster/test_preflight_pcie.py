"""Preflight's PCIe link rule (filter_plugins/pcie_links.py, files/probe_pcie.py) on real links.

The link states are published captures (tests/data/preflight, sources in tests/data/README.md):
lspci LnkCap / LnkSta of GPUs and their upstream bridges, and a sysfs dump of a GPU behind a
PCIe switch. The busy percentages are the scenario under test (idle, busy, unknown), not data.
"""

from __future__ import annotations

import re

import pytest

from .conftest import PREFLIGHT_DATA

_HEADER = re.compile(r"#\s*lspci -vvv -s (\S+)\s+\((GPU function|upstream \S*ridge)")
_LINK = re.compile(r"(LnkCap|LnkSta):\s*(?:Port #\d+,\s*)?Speed ([\d.]+)GT/s[^,]*, Width x(\d+)")


def lspci_paths(name):
    """The fixture's devices as probe_pcie records: each GPU function with the upstream bridges
    that follow it in the capture as its path (LnkCap = max_*, LnkSta = current)."""
    devices, current = [], None
    for line in (PREFLIGHT_DATA / name).read_text().splitlines():
        header = _HEADER.search(line)
        if header:
            current = {"bdf": header.group(1), "path": [], "busy_percent": None}
            if header.group(2) == "GPU function":
                devices.append(current)
            else:
                devices[-1]["path"].append(current)
            continue
        link = _LINK.search(line)
        if link and current is not None:
            prefix = "max_" if link.group(1) == "LnkCap" else ""
            current[f"{prefix}speed_gts"] = float(link.group(2))
            current[f"{prefix}width"] = int(link.group(3))
    return devices


def checks_by_name(checks, check_plugin):
    return {c["check"]: check_plugin.record(c) for c in checks}


def test_idle_downtrained_gpu_passes_and_says_why(pcie_links, check_plugin):
    """An idle GPU at 2.5 GT/s of its 16 GT/s (LnkSta 'downgraded', the bridge at 2.5 too)
    passes speed at its capability, and the message names the downtraining; the old rule
    (current_link_speed >= max_link_speed) failed it."""
    gpu, _ = lspci_paths("lspci_downgraded_idle_2gpu.txt")
    assert (gpu["speed_gts"], gpu["max_speed_gts"]) == (2.5, 16.0)  # what the old rule compared
    gpu["busy_percent"] = 0
    recs = checks_by_name(pcie_links.pcie_checks([gpu], "gpu"), check_plugin)
    speed, width = recs["gpu_pcie_speed"], recs["gpu_pcie_width"]
    assert (speed["status"], speed["measured"], speed["threshold"]) == ("pass", 16.0, 16.0)
    assert "1 of 1 downtrained while idle (2.5 GT/s now; power saving)" in speed["message"]
    assert (width["status"], width["measured"], width["threshold"]) == ("pass", 16, 16)


def test_downtrained_link_on_a_busy_gpu_fails(pcie_links, check_plugin):
    """The same link while the GPU is busy: it should have trained up, so it fails, naming the
    device, its current speed, the load and the capability."""
    gpu, _ = lspci_paths("lspci_downgraded_idle_2gpu.txt")
    checks = pcie_links.pcie_checks([gpu], "gpu", busy={"0000:81:00.0": 87})
    speed = checks_by_name(checks, check_plugin)["gpu_pcie_speed"]
    assert speed["status"] == "fail"
    assert speed["message"].startswith("gpu_pcie_speed: expected >= 16 GT/s, found 2.5 GT/s")
    assert "0000:81:00.0 at 2.5 GT/s while 87% busy (capable of 16 GT/s)" in speed["message"]


def test_unknown_busy_state_is_judged_on_capability(pcie_links, check_plugin):
    """A GPU whose busy state is not readable passes on capability and says so."""
    _, gpu = lspci_paths("lspci_downgraded_idle_2gpu.txt")
    speed = checks_by_name(pcie_links.pcie_checks([gpu], "gpu"), check_plugin)["gpu_pcie_speed"]
    assert speed["status"] == "pass"
    assert "busy state not readable: judged on capability" in speed["message"]


def test_pinned_speed_above_the_path_capability_fails(pcie_links, check_plugin):
    """A Gen4-capable path fails a pinned 32 GT/s (Gen5) minimum, whatever the busy state."""
    gpu, _ = lspci_paths("lspci_downgraded_idle_2gpu.txt")
    gpu["busy_percent"] = 0
    checks = pcie_links.pcie_checks([gpu], "gpu", min_speed_gts=32)
    speed = checks_by_name(checks, check_plugin)["gpu_pcie_speed"]
    assert (speed["status"], speed["measured"], speed["threshold"]) == ("fail", 16.0, 32.0)
    assert "0000:81:00.0 path capable of 16 GT/s, the device needs 32 GT/s" in speed["message"]


def test_x16_gpu_in_a_x8_slot_fails_width_strictly(pcie_links, check_plugin):
    """An x16 GPU trained x8 under a x8 root port fails width (strict: the device's own x16),
    unless x8 is pinned as the minimum; its idle 2.5 GT/s still passes speed."""
    (gpu,) = lspci_paths("lspci_x8_slot_rtx3090.txt")
    assert gpu["path"][0]["max_width"] == 8  # the bridge: the slot is x8
    gpu["busy_percent"] = 0
    recs = checks_by_name(pcie_links.pcie_checks([gpu], "gpu"), check_plugin)
    width = recs["gpu_pcie_width"]
    assert (width["status"], width["measured"], width["threshold"]) == ("fail", 8, 16)
    assert "trained x8, the device is x16" in width["message"]
    assert recs["gpu_pcie_speed"]["status"] == "pass"
    pinned = checks_by_name(pcie_links.pcie_checks([gpu], "gpu", min_width=8), check_plugin)
    assert pinned["gpu_pcie_width"]["status"] == "pass"


def _sysfs_tree(root, values):
    """A sysfs layout (devices/pci0000:00/<usp>/<dsp>/<gpu>, bus/pci/devices/<bdf> links)
    holding the captured attribute values; the downstream port 0000:02:00.0 between the
    switch's upstream port and the GPU was not captured, so it has no attributes."""
    chain = ["0000:01:00.0", "0000:02:00.0", "0000:03:00.0"]
    bus = root / "bus" / "pci" / "devices"
    bus.mkdir(parents=True)
    directory = root / "devices" / "pci0000:00"
    for bdf in chain:
        directory = directory / bdf
        directory.mkdir(parents=True)
        (bus / bdf).symlink_to(directory)
    for path, value in values.items():
        _, _, rest = path.partition("/sys/bus/pci/devices/")
        bdf, _, attr = rest.partition("/")
        (bus / bdf / attr).write_text(value + "\n")
    return bus


def _sysfs_values(name):
    """The ``tail -v`` dump as {path: value}."""
    values, path = {}, None
    for line in (PREFLIGHT_DATA / name).read_text().splitlines():
        match = re.match(r"==> (\S+) <==", line)
        if match:
            path = match.group(1)
        elif path and line.strip():
            values[path] = line.strip()
            path = None
    return values


def test_probe_reads_the_path_and_finds_the_narrow_switch_uplink(
    tmp_path, probe_pcie, pcie_links, check_plugin
):
    """The GPU's own link is at its maximum (32 GT/s x16), but the switch above it runs x8:
    the probe reads the path, and width fails naming the switch port."""
    bus = _sysfs_tree(tmp_path, _sysfs_values("sysfs_links_radeon_behind_switch.txt"))
    gpu = probe_pcie.device("0000:03:00.0", str(bus))
    assert (gpu["speed_gts"], gpu["max_speed_gts"], gpu["width"], gpu["max_width"]) == (
        32.0,
        32.0,
        16,
        16,
    )
    assert gpu["error"] is None
    assert [hop["bdf"] for hop in gpu["path"]] == ["0000:01:00.0"]
    assert gpu["path"][0] == {
        "bdf": "0000:01:00.0",
        "speed_gts": 16.0,
        "max_speed_gts": 32.0,
        "width": 8,
        "max_width": 16,
    }
    recs = checks_by_name(pcie_links.pcie_checks([gpu], "gpu"), check_plugin)
    width = recs["gpu_pcie_width"]
    assert width["status"] == "fail"
    assert (
        "0000:03:00.0 trained x8 (the link at 0000:01:00.0), the device is x16"
        in (width["message"])
    )


def test_unreadable_link_is_a_skip_with_its_reason(tmp_path, probe_pcie, pcie_links):
    """A device missing from sysfs (a VM, a fake tool) cannot be judged: skipped, and why."""
    gpu = probe_pcie.device("0000:05:00.0", str(tmp_path))
    assert gpu["error"] == f"{tmp_path}/0000:05:00.0 does not exist"
    checks = pcie_links.pcie_checks([gpu], "gpu")
    assert {c["skip"] for c in checks} == {
        f"PCIe link state not readable: {tmp_path}/0000:05:00.0 does not exist"
    }


def test_tool_record_stands_in_when_sysfs_has_no_link(tmp_path, probe_pcie, pcie_links):
    """nvidia-smi's own link record (gen and width, as gpu_stack keeps it) is judged when sysfs
    cannot show the device."""
    gpu = probe_pcie.device("0000:18:00.0", str(tmp_path))
    tool = [
        {
            "bdf": "0000:18:00.0",
            "speed_gts": 2.5,
            "max_speed_gts": 32.0,
            "width": 16,
            "max_width": 16,
        }
    ]
    checks = pcie_links.pcie_checks([gpu], "gpu", fallback=tool, busy={"0000:18:00.0": 0})
    assert [(c["check"], c["measured"], c["threshold"]) for c in checks] == [
        ("gpu_pcie_speed", 32.0, 32.0),
        ("gpu_pcie_width", 16, 16),
    ]


@pytest.mark.parametrize("reason", ["no GPU", "no RDMA NIC"])
def test_a_reason_to_skip_applies_to_both_checks(pcie_links, reason):
    checks = pcie_links.pcie_checks([], "gpu", skip=reason)
    assert [(c["check"], c["skip"]) for c in checks] == [
        ("gpu_pcie_speed", reason),
        ("gpu_pcie_width", reason),
    ]


def test_probe_main_reports_both_kinds(tmp_path, probe_pcie, capsys, monkeypatch):
    """The script's JSON: one record per requested GPU and NIC."""
    import json

    monkeypatch.setattr(
        "sys.argv", ["probe_pcie.py", json.dumps({"gpu": ["x"], "sysfs": str(tmp_path)})]
    )
    probe_pcie.main()
    out = json.loads(capsys.readouterr().out)
    assert [d["bdf"] for d in out["gpu"]] == ["x"] and out["nic"] == []
    assert out["readable"] is True


def test_gpus_on_the_pci_bus_are_found_without_a_tool(tmp_path, probe_gpu):
    """The probe counts AMD and NVIDIA GPUs from sysfs vendor/class, so "no GPU tool" is told
    apart from "no GPU" (classes: MI325X "Processing accelerators [1200]", A100 SXM4
    "3D controller [0302]"; sources in tests/data/README.md)."""
    for bdf, vendor, klass in (
        ("0000:05:00.0", "0x1002", "0x120000"),
        ("0000:da:00.0", "0x10de", "0x030200"),
        ("0000:00:00.0", "0x1022", "0x060000"),
        ("0000:05:00.1", "0x1002", "0x040300"),
    ):
        (tmp_path / bdf).mkdir()
        (tmp_path / bdf / "vendor").write_text(vendor + "\n")
        (tmp_path / bdf / "class").write_text(klass + "\n")
    assert probe_gpu.pci_gpus(str(tmp_path)) == [
        {"bdf": "0000:05:00.0", "vendor": "amd"},
        {"bdf": "0000:da:00.0", "vendor": "nvidia"},
    ]


def test_service_state_without_systemd_says_why(probe_gpu, monkeypatch):
    monkeypatch.setattr(probe_gpu.shutil, "which", lambda name: None)
    assert probe_gpu.service_state("nvidia-fabricmanager") == (
        "unknown",
        "systemctl not found (no systemd on this host or container)",
    )
