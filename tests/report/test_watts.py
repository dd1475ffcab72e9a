"""The dashboard's "where the watts go" section: power and utilisation over time beside the
requests' latency, energy per token per point, and nothing where nothing was measured.
Runs are the demo's real sweep given known telemetry (tests/telemetry/sweeps.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pocforge.report import render
from pocforge.results.store import Run, RunStore
from pocforge.spec import load_poc
from tests.report.conftest import DATA
from tests.telemetry.sweeps import with_telemetry

# The store's provenance runs git.
pytestmark = pytest.mark.process

FIGURE = re.compile(r'<script type="application/json" id="fig-([^"]+)">(.*?)</script>', re.S)
SECTION = re.compile(r'<section class="page" id="watts-chat">(.*?)</section>', re.S)


def _run(store: RunStore, tmp_path: Path, **telemetry) -> Run:
    run = store.create(load_poc("demo"))
    sweep = with_telemetry(DATA / "pocforge-sweep-a", tmp_path / "sweep", **telemetry)
    with run.stage("serving") as stage:
        stage.add_tree(sweep, "chat")
    run.finish()
    return run


def _page(run: Run, lang: str = "en") -> tuple[str, dict[str, dict]]:
    page = render(run.path, lang=lang).read_text()
    return page, {chart: json.loads(text) for chart, text in FIGURE.findall(page)}


def test_power_utilisation_and_latency_over_time(store, tmp_path) -> None:
    """Two GPUs at 250 W each: the node's power row reads 500 W, its GPU utilisation is
    high inside the points' windows and low between them, the latency row holds the
    requests' median TTFT and TPOT, and each point is named once over its windows."""
    run = _run(store, tmp_path, power_w=250.0, gpus=2, price=2.0)
    page, figures = _page(run)
    (section,) = SECTION.findall(page)
    assert "Where the watts go — chat" in section
    fig = figures["watts-chat"]
    traces = {t["name"]: t for t in fig["data"]}
    assert set(traces) == {
        "node-0: GPUs",
        "node-0: GPU",
        "node-0: CPU",
        "median TTFT",
        "median TPOT",
    }
    assert set(traces["node-0: GPUs"]["y"]) == {500.0}  # sampled throughout: no gaps
    assert max(traces["node-0: GPU"]["y"]) == 80.0 and min(traces["node-0: GPU"]["y"]) == 5.0
    assert traces["median TTFT"]["yaxis"] != traces["node-0: GPUs"]["yaxis"]  # rows of their own
    labels = [a["text"] for a in fig["layout"]["annotations"]]
    assert labels == ["c1", "c2", "c4", "c8"]
    rects = [s for s in fig["layout"]["shapes"] if s.get("type") == "rect"]
    assert len(rects) == 8 * 3  # 4 points × 2 repeats, shaded in each of the 3 rows
    # the table: the sweep's aggregate per point
    rows = re.findall(r"<tr><td>(c\d)</td><td>(GPU)</td><td>([\d.,]+)</td><td>([\d.]+)</td>",
                      section)  # fmt: skip
    assert [(r[0], r[1], r[2]) for r in rows] == [
        (p, "GPU", "500") for p in ("c1", "c2", "c4", "c8")
    ]
    assert "power readings" in section and "$ per million output tokens" in section


def test_no_power_no_power_row_and_says_why(store, tmp_path) -> None:
    """This machine's case: host telemetry only. Utilisation and latency are drawn; no
    power row, no energy columns, and the reason is on the page."""
    run = _run(store, tmp_path, power_w=None)
    page, figures = _page(run)
    (section,) = SECTION.findall(page)
    names = {t["name"] for t in figures["watts-chat"]["data"]}
    assert names == {"node-0: CPU", "median TTFT", "median TPOT"}
    assert "power (W)" not in json.dumps(figures["watts-chat"]["layout"])
    assert "Energy not measured: no power source on the node" in section
    assert "<table" not in section  # no figures and no price: nothing to tabulate


def test_a_run_without_telemetry_has_no_section(store, tmp_path) -> None:
    run = store.create(load_poc("demo"))
    with run.stage("serving") as stage:
        stage.add_tree(DATA / "pocforge-sweep-a", "chat")
    run.finish()
    page, figures = _page(run)
    assert 'id="watts-chat"' not in page and "watts-chat" not in figures


def test_the_section_in_chinese(store, tmp_path) -> None:
    run = _run(store, tmp_path, power_w=250.0, gpus=2)
    page, figures = _page(run, "zh-CN")
    (section,) = SECTION.findall(page)
    assert "功耗去向 — chat" in section and "平均功率（W）" in section
    assert "Where the watts go" not in section and "avg power" not in section
    names = {t["name"] for t in figures["watts-chat"]["data"]}
    assert "node-0：GPU 合计" in names and "TTFT 中位数" in names


def test_link_traffic_from_rates_and_from_accumulated_counters() -> None:
    """DCGM reports NVLink and PCIe as rates (B/s); AMD's exporter accumulates xGMI bytes,
    differenced between a GPU's readings. Two GPUs a node, summed: node a (DCGM) 2 x (10 +
    5) GB/s NVLink and 2 x 1.5 GB/s PCIe; node b (exporter) 2 x 4 GB/s xGMI."""
    from pocforge.report.watts import device_curves
    from pocforge.telemetry.parsers import GpuSample

    t0 = 1_764_590_400.0
    gpu = []
    for i in range(5):
        t = t0 + i
        for g in range(2):
            gpu.append(GpuSample(source="dcgm-exporter", host="a", gpu=g, timestamp_s=t,
                                 fabric_tx_bytes_per_s=10e9, fabric_rx_bytes_per_s=5e9,
                                 pcie_tx_bytes_per_s=1e9, pcie_rx_bytes_per_s=0.5e9))  # fmt: skip
            gpu.append(GpuSample(source="amd-metrics-exporter", host="b", gpu=g, timestamp_s=t,
                                 fabric_rx_bytes=3e9 * i, fabric_tx_bytes=1e9 * i))  # fmt: skip
    _power, _util, links = device_curves(gpu, [], [], t0, 1.0, lambda text: text)
    assert set(links) == {"a: NVLink/xGMI", "a: PCIe", "b: NVLink/xGMI"}
    assert set(links["a: NVLink/xGMI"][1]) == {30.0}
    assert set(links["a: PCIe"][1]) == {3.0}
    xs, ys = links["b: NVLink/xGMI"]
    assert set(ys) == {8.0} and len(xs) == 4  # the first reading has nothing to difference
