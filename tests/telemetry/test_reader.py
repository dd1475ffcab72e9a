"""A recorder's raw file as the kit's series: the tools' records through the parsers tested
on real captures (tests/data/telemetry/, sources in tests/data/README.md), the host's
``/proc`` lines as utilisation and memory, RAPL counters as energy and power."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pocforge.telemetry.host import (
    CpuTimes,
    RaplCounter,
    cpu_util_pct,
    parse_meminfo,
    parse_proc_stat,
)
from pocforge.telemetry.reader import read_raw
from pocforge.telemetry.recorder import rapl_packages
from pocforge.telemetry.series import Series, window
from tests.telemetry.captures import h100_noheader_lines, read

T = 1_764_590_400.0


def raw(kind: str, **fields) -> str:
    return json.dumps({"kind": kind, **fields}) + "\n"


def meta(**more) -> str:
    fields = {"host": "ns-node", "cpus": 8, "interval_s": 1.0, "started_s": T,
              "sources": [{"name": "host", "detail": "/proc"}], **more}  # fmt: skip
    return raw("meta", **fields)


def test_a_raw_file_of_real_captures_becomes_the_series(tmp_path):
    """nvidia-smi's looping rows (the 4x H100 capture), an amd-smi watch document (the
    CHANGELOG capture) after watch mode's banner, the host's /proc lines and a RAPL counter
    that wraps; text between amd-smi's documents that is not its banner is a problem; a
    line cut by a node that died is counted, not fatal."""
    amd_doc = json.dumps(json.loads(read("amd_smi_metric_power_json_changelog.json")), indent=4)
    lines = [
        meta(not_used=["AMD: x"]),
        raw("host", t=T, stat="cpu  100 0 100 800 0 0 0 0 0 0",
            meminfo="MemTotal: 1000 kB\nMemAvailable: 250 kB",
            rapl={"0": 262_000_000}, rapl_max_uj={"0": 262_143_328_850}),  # fmt: skip
        *[raw("raw", source="nvidia-smi", detail="", t=T + 0.1, text=x) for x in h100_noheader_lines()],
        raw("raw", source="amd-smi", detail="power", t=T + 0.2, skipped=True,
            text="'CTRL' + 'C' to stop watching output:"),  # fmt: skip
        raw("raw", source="amd-smi", detail="power", t=T + 0.3, text=amd_doc),
        raw("raw", source="amd-smi", detail="power", t=T + 0.4, skipped=True, text="Traceback"),
        raw("host", t=T + 2, stat="cpu  200 0 200 1000 0 0 0 0 0 0",
            meminfo="MemTotal: 1000 kB\nMemAvailable: 500 kB", rapl={"0": 100_000_000}),  # fmt: skip
        raw("problem", source="nvidia-smi", t=T + 2.5, message="nvidia-smi exited with 9"),
        raw("end", stopped_s=T + 3, wall_s=3.0, cost=[
            {"source": "host", "records": 2, "cpu_s": 0.01, "tool_cpu_s": None},
            {"source": "nvidia-smi", "records": 4, "cpu_s": 0.01, "tool_cpu_s": 0.01},
            {"source": "amd-smi power", "records": 1, "cpu_s": 0.0, "tool_cpu_s": 0.3}]),  # fmt: skip
        '{"kind": "raw", "source": "nvidia-smi", "t": 1',
    ]  # fmt: skip
    path = tmp_path / "telemetry.serve.raw.jsonl"
    path.write_text("".join(lines))
    series = read_raw(path, "node1")
    assert series.meta.host == "node1" and series.meta.not_used == ["AMD: x"]
    nvidia = [s for s in series.gpu if s.source == "nvidia-smi"]
    assert [s.power_w for s in nvidia] == [70.89, 71.71, 70.78, 72.17]
    (amd,) = [s for s in series.gpu if s.source == "amd-smi"]
    assert (amd.power_w, amd.timestamp_s) == (10.0, T + 0.3)  # stamped when it was read
    assert {s.host for s in series.gpu} == {"node1"}
    first, second = series.host
    assert (first.cpu_util_pct, second.cpu_util_pct) == (None, pytest.approx(100 * 200 / 400))
    assert second.mem_used_bytes == 500 * 1024 and second.cpu_count == 8
    p0, p1 = series.packages
    assert p1.energy_j == pytest.approx((262_143_328_850 + 1 - 262_000_000 + 100_000_000) / 1e6)
    assert p1.power_w == pytest.approx(p1.energy_j / 2)
    assert [p.message for p in series.problems] == [
        "amd-smi: not JSON: Traceback",
        "nvidia-smi exited with 9",
    ]
    assert series.unreadable == 1
    costs = {c.source: (c.samples, c.tool_cpu_s) for c in series.end.cost}
    assert costs == {"host": (2, None), "nvidia-smi": (4, 0.01), "amd-smi power": (1, 0.3)}
    written = Series.read(series.write(tmp_path / "node1.jsonl"))  # what the run keeps
    assert (len(written.gpu), len(written.host), len(written.packages)) == (5, 2, 2)
    assert written.end is not None and written.unreadable == 0
    assert read_raw(path).meta.host == "ns-node"  # the recorder's own name by default


def test_proc_stat_and_meminfo_text():
    """proc(5)'s layout: guest time is inside user time, not added again; MemAvailable."""
    before = parse_proc_stat("cpu  100 0 50 800 50 0 0 0 10 0\ncpu0 100 0 50 800 50 0 0 0 10 0\n")
    after = parse_proc_stat("cpu  200 0 100 1500 100 0 0 0 20 0\ncpu0 200 0 100 1500 100 0 0 0\n")
    assert before == CpuTimes(busy=150, total=1000, cpus=1)
    assert cpu_util_pct(before, after) == pytest.approx(100 * 150 / 900)
    assert cpu_util_pct(after, after) is None
    assert parse_meminfo("MemTotal: 1000 kB\nMemFree: 10 kB\nMemAvailable: 400 kB\n") == (
        600 * 1024,
        1000 * 1024,
    )


# --- RAPL -------------------------------------------------------------------------------------


def powercap_tree(root: Path, packages: dict[int, int], max_range: int = 262_143_328_850) -> Path:
    """A powercap tree laid out as Documentation/power/powercap/powercap.rst shows it:
    package zones intel-rapl:N with a core subzone, and a psys zone that is not a package."""
    for n, energy in packages.items():
        zone = root / f"intel-rapl:{n}"
        (zone / f"intel-rapl:{n}:0").mkdir(parents=True)
        (zone / "name").write_text(f"package-{n}\n")
        (zone / "energy_uj").write_text(f"{energy}\n")
        (zone / "max_energy_range_uj").write_text(f"{max_range}\n")
        (zone / f"intel-rapl:{n}:0" / "name").write_text("core\n")
    psys = root / f"intel-rapl:{len(packages)}"
    psys.mkdir()
    (psys / "name").write_text("psys\n")
    (psys / "energy_uj").write_text("5\n")
    (psys / "max_energy_range_uj").write_text(f"{max_range}\n")
    return root


def test_rapl_reads_package_zones_only(tmp_path):
    zones, problems = rapl_packages(powercap_tree(tmp_path, {0: 1000, 1: 2000}))
    assert [z.package for z in zones] == [0, 1] and problems == []
    assert rapl_packages(tmp_path / "absent")[0] == []
    assert "no RAPL" in rapl_packages(tmp_path / "absent")[1][0]


def test_rapl_counter_undoes_its_wrap():
    """energy_uj counts up to max_energy_range_uj and starts again at 0."""
    counter = RaplCounter(max_range_uj=999)
    assert counter.add(900) == 0.0
    assert counter.add(990) == pytest.approx(90e-6)
    assert counter.add(10) == pytest.approx(110e-6)  # 990 -> 999 -> 0 -> 10: 20 µJ more
    assert counter.add(500) == pytest.approx(600e-6)


def test_package_energy_and_power(tmp_path):
    """Two readings of a package 2 s apart that spent 100 J: 50 W, and the window between
    them integrates the counter (a CPU-only node's energy)."""
    stat = "cpu  100 0 100 800 0 0 0 0 0 0"
    path = tmp_path / "raw.jsonl"
    path.write_text(
        meta()
        + raw("host", t=T, stat=stat, rapl={"0": 5_000_000}, rapl_max_uj={"0": 262_143_328_850})
        + raw("host", t=T + 2, stat=stat, rapl={"0": 105_000_000})
    )
    pkg0, pkg1 = read_raw(path, "cpu-node").packages
    assert (pkg0.energy_j, pkg0.power_w) == (0.0, None)
    assert (pkg1.energy_j, pkg1.power_w) == (pytest.approx(100.0), pytest.approx(50.0))
    win = window([], [pkg0, pkg1], T + 0.5, T + 1.5, interval_s=2.0, output_tokens=10,
                 gpu_count=1)  # fmt: skip
    assert win.devices == "cpu-package" and win.energy.valid
    (est,) = win.energy.per_gpu
    assert (est.device, est.method) == ("CPU package", "counter")
    assert win.energy.energy_j == pytest.approx(50.0)
    assert win.energy.joules_per_output_token == pytest.approx(5.0)
