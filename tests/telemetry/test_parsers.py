"""The telemetry parsers against outputs captured on real machines (tests/data/telemetry/,
sources in tests/data/README.md), and the ways broken output must fail."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from pydantic import ValidationError

from pocforge.telemetry.parsers import (
    MIB,
    NVIDIA_SMI_ARGS,
    NVIDIA_SMI_QUERY_FIELDS,
    GpuSample,
    TelemetryParseError,
    nvidia_smi_rows,
    parse_amd_metrics_exporter,
    parse_amd_smi_metric_json,
    parse_dcgm_exporter,
    parse_nvidia_smi_csv,
    parse_rocm_smi_json,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "telemetry"
T = 1_764_590_400.0  # when a sampler would have read the output (2025-12-01T12:00:00Z)


def read(name: str) -> str:
    return (DATA / name).read_text()


# --- amd-smi ------------------------------------------------------------------------------


def test_amd_smi_power_section_list_form():
    """AMD's own `amd-smi metric -p --json` (ROCm 6.1 release notes): value/unit readings in
    the list form; UNTHROTTLED is no active reason; sections not queried stay None."""
    (s,) = parse_amd_smi_metric_json(
        read("amd_smi_metric_power_json_changelog.json"), host="mi1", timestamp=T
    )
    assert (s.source, s.host, s.gpu, s.timestamp_s) == ("amd-smi", "mi1", 0, T)
    assert s.power_w == 10.0
    assert s.throttle == ()
    assert s.gfx_util_pct is None and s.energy_j is None and s.mem_used_bytes is None


def test_amd_smi_gpu_data_wrapper_reads_the_same():
    """amd-smi 26.x wraps the same per-GPU objects in {"gpu_data": [...]} (the shape that
    github.com/nathaninline/ajean#39 quotes from a ROCm 7 install); both read alike."""
    listed = json.loads(read("amd_smi_metric_power_json_changelog.json"))
    wrapped = json.dumps({"gpu_data": listed})
    assert parse_amd_smi_metric_json(wrapped, host="mi1", timestamp=T) == (
        parse_amd_smi_metric_json(
            read("amd_smi_metric_power_json_changelog.json"), host="mi1", timestamp=T
        )
    )


def test_amd_smi_unavailable_reading_is_none_not_zero():
    """A reading amd-smi prints as "N/A" (as on a VF or an APU) is unreported, not 0 W."""
    listed = json.loads(read("amd_smi_metric_power_json_changelog.json"))
    listed[0]["power"]["socket_power"] = "N/A"
    listed[0]["power"]["throttle_status"] = "N/A"
    (s,) = parse_amd_smi_metric_json(json.dumps(listed), host="mi1", timestamp=T)
    assert s.power_w is None and s.throttle is None


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "amd-smi: not JSON"),
        ('[\n    {\n        "gpu": 0,\n        "power": {', "amd-smi: not JSON"),
        ('{"gpus": []}', "expected a list of GPUs"),
        ('[{"power": {}}]', "without a 'gpu' index"),
        ('[{"gpu": "zero"}]', "not a non-negative integer"),
        ('[{"gpu": 0, "power": {"socket_power": {"unit": "W"}}}]', "reading without a value"),
        ('[{"gpu": 0, "power": {"socket_power": {"value": 10, "unit": "kW"}}}]', "unknown unit"),
        ('[{"gpu": 0, "power": {"socket_power": "ten"}}]', "is not a number"),
    ],
)
def test_amd_smi_bad_output_names_the_problem(text, match):
    with pytest.raises(TelemetryParseError, match=match):
        parse_amd_smi_metric_json(text, host="mi1", timestamp=T)


def test_amd_smi_truncated_real_output_is_refused():
    text = read("amd_smi_metric_power_json_changelog.json")
    with pytest.raises(TelemetryParseError, match="^amd-smi: not JSON"):
        parse_amd_smi_metric_json(text[: len(text) // 2], host="mi1", timestamp=T)


def test_amd_smi_without_any_timestamp_is_refused():
    with pytest.raises(TelemetryParseError, match="no timestamp"):
        parse_amd_smi_metric_json(read("amd_smi_metric_power_json_changelog.json"), host="mi1")


# --- rocm-smi -----------------------------------------------------------------------------


def test_rocm_smi_power_temperatures_and_vram():
    """RX 7900 XTX, `rocm-smi --showtemp --showuse --showpower --showmeminfo vram --json`."""
    (s,) = parse_rocm_smi_json(read("rocm_smi_json_rx7900xtx.json"), host="w1", timestamp=T)
    assert (s.source, s.gpu, s.timestamp_s) == ("rocm-smi", 0, T)
    assert s.power_w == 19.0 and s.gfx_util_pct == 0.0
    assert (s.temp_edge_c, s.temp_hotspot_c, s.temp_mem_c) == (49.0, 49.0, 62.0)
    assert (s.mem_used_bytes, s.mem_total_bytes) == (794341376, 25753026560)
    assert s.energy_j is None and s.throttle is None


def test_rocm_smi_2019_labels_with_lowercase_units():
    """ROCm 2.x printed "(c)" and "Sensor mem"; the fan keys are not telemetry we keep."""
    (s,) = parse_rocm_smi_json(
        read("rocm_smi_json_2019_lowercase_units.json"), host="w1", timestamp=T
    )
    assert s.power_w == 222.0
    assert (s.temp_edge_c, s.temp_hotspot_c, s.temp_mem_c) == (77.0, 103.0, 79.0)


def test_rocm_smi_two_cards_memory_activity():
    """`--showmemuse` on 2x RX 6800: "GPU memory use (%)" is memory-controller busy
    (mem_busy_percent), not capacity; "Memory Activity": "N/A" is not read."""
    samples = parse_rocm_smi_json(
        read("rocm_smi_json_2x_rx6800_showmemuse.json"), host="w1", timestamp=T
    )
    assert [(s.gpu, s.mem_util_pct, s.power_w) for s in samples] == [(0, 0.0, None), (1, 0.0, None)]


def test_rocm_smi_secondary_die_na_is_none():
    """MI250's secondary die prints "N/A (Secondary die)" for power (ROCm/rocm_smi_lib#160)."""
    doc = json.loads(read("rocm_smi_json_rx7900xtx.json"))
    doc["card0"]["Average Graphics Package Power (W)"] = "N/A (Secondary die)"
    (s,) = parse_rocm_smi_json(json.dumps(doc), host="w1", timestamp=T)
    assert s.power_w is None and s.temp_edge_c == 49.0


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('{"card0": {"GPU use (%)": "0"', "rocm-smi: not JSON"),
        ('["card0"]', "expected an object"),
        ('{"system": {"Driver version": "6.7.0"}}', "no cardN entries"),
        ('{"card0": "N/A"}', r"card0: expected an object"),
        ('{"card0": {"GPU use (%)": "busy"}}', "card0: 'gpu use \\(%\\)': 'busy' is not a number"),
        ('{"card0": {"sclk clock speed:": "1700"}}', r"is not a '\(<n>Mhz\)' clock"),
    ],
)
def test_rocm_smi_bad_output_names_the_problem(text, match):
    with pytest.raises(TelemetryParseError, match=match):
        parse_rocm_smi_json(text, host="w1", timestamp=T)


# --- nvidia-smi ---------------------------------------------------------------------------


def test_sampler_query_is_the_noheader_nounits_form():
    query, fmt = NVIDIA_SMI_ARGS
    assert fmt == "--format=csv,noheader,nounits"
    assert query.removeprefix("--query-gpu=").split(",") == list(NVIDIA_SMI_QUERY_FIELDS)
    assert NVIDIA_SMI_QUERY_FIELDS[:2] == ("timestamp", "index")


def test_nvidia_smi_h100_header_form_with_timestamps():
    """4x H100 (driver 535.161.07), header + nounits: the timestamp is local time without a
    zone, read in the zone given; power.draw.average stands in for a missing power.draw."""
    samples = parse_nvidia_smi_csv(read("nvidia_smi_csv_nounits_4xh100.csv"), host="h100")
    assert [s.gpu for s in samples] == [0, 1, 2, 3]
    first = samples[0]
    assert first.timestamp_s == datetime(2024, 3, 15, 13, 57, 59, 791000, UTC).timestamp()
    assert first.power_w == 70.89  # power.draw.average; power.draw.instant is 70.68
    assert (first.gfx_util_pct, first.mem_util_pct) == (0.0, 0.0)
    assert (first.mem_used_bytes, first.mem_total_bytes) == (0, 81559 * MIB)
    assert (first.sm_clock_mhz, first.mem_clock_mhz) == (345.0, 2619.0)
    assert (first.temp_gpu_c, first.temp_mem_c) == (26.0, 35.0)
    assert first.throttle is None  # not queried
    assert [s.power_w for s in samples] == [70.89, 71.71, 70.78, 72.17]

    pst = timezone(timedelta(hours=-7))
    shifted = parse_nvidia_smi_csv(read("nvidia_smi_csv_nounits_4xh100.csv"), host="h", tz=pst)
    assert shifted[0].timestamp_s - first.timestamp_s == 7 * 3600


def test_nvidia_smi_cells_with_units_are_stripped():
    """`--format=csv` repeats the unit in each cell ("26 %", "83.92 W", "1320 MHz")."""
    rows = nvidia_smi_rows(read("nvidia_smi_csv_units_loop_1gpu.csv"))
    assert len(rows) == 13
    assert rows[0] == {
        "index": "0",
        "temperature.gpu": "56",
        "utilization.gpu": "26",
        "utilization.memory": "4",
        "fan.speed": "34",
        "pstate": "P3",
        "power.draw": "83.92",
        "clocks.current.sm": "1320",
        "clocks.current.memory": "5001",
        "clocks.current.graphics": "1320",
    }


def test_nvidia_smi_looped_rows_without_timestamp_are_refused():
    """The same capture holds 13 rows of GPU 0 and no timestamp field: they cannot be placed
    in time, so they are not stamped all alike."""
    with pytest.raises(TelemetryParseError, match="GPU 0 appears in several rows"):
        parse_nvidia_smi_csv(read("nvidia_smi_csv_units_loop_1gpu.csv"), host="g", timestamp=T)


def test_nvidia_smi_query_without_index_is_refused():
    """Two GPUs queried by name, not index: rows are readable, samples are not."""
    rows = nvidia_smi_rows(read("nvidia_smi_csv_units_2gpu_no_index.csv"))
    assert [(r["name"], r["memory.used"], r["power.draw"]) for r in rows] == [
        ("GeForce GTX 1080 Ti", "2856", "106.56"),
        ("GeForce GTX 1060 6GB", "4", "5.68"),
    ]
    with pytest.raises(TelemetryParseError, match="no index field"):
        parse_nvidia_smi_csv(read("nvidia_smi_csv_units_2gpu_no_index.csv"), host="g", timestamp=T)


def test_nvidia_smi_na_cells_in_noheader_form():
    """GB10 (DGX Spark) has no dedicated memory: memory.used/total read "[N/A]"."""
    fields = ("memory.used", "memory.total", "utilization.memory")
    rows = nvidia_smi_rows(read("nvidia_smi_csv_noheader_nounits_gb10_na.csv"), fields)
    assert rows == [{"memory.used": None, "memory.total": None, "utilization.memory": "0"}]


def test_nvidia_smi_noheader_rows_are_read_by_the_query_fields():
    """The sampler's form: the H100 capture's first row, re-queried as the sampler would,
    maps by NVIDIA_SMI_QUERY_FIELDS; the aliases clocks.sm/clocks.mem and the event bitmask."""
    line = (
        "2024/03/15 13:57:59.791, 0, 70.89, 0, 0, 0, 81559, 345, 2619, 26, 35, 0x0000000000000004"
    )
    (s,) = parse_nvidia_smi_csv(line, host="h100", fields=NVIDIA_SMI_QUERY_FIELDS)
    assert (s.power_w, s.sm_clock_mhz, s.mem_clock_mhz, s.temp_mem_c) == (70.89, 345, 2619, 35)
    assert s.throttle == ("sw_power_cap",)


@pytest.mark.parametrize(
    ("mask", "reasons"),
    [
        ("0x0000000000000000", ()),
        ("0x0000000000000001", ("gpu_idle",)),
        ("0x0000000000000044", ("sw_power_cap", "hw_thermal_slowdown")),
        ("0x0000000000001000", ("0x1000",)),
        ("[N/A]", None),
    ],
)
def test_nvidia_clock_event_reasons_decode(mask, reasons):
    line = f"0, {mask}"
    (s,) = parse_nvidia_smi_csv(
        line, host="h", fields=("index", "clocks_event_reasons.active"), timestamp=T
    )
    assert s.throttle == reasons


@pytest.mark.parametrize(
    ("text", "fields", "match"),
    [
        ("", None, "nvidia-smi: no output"),
        ("index, power.draw [W]\n", None, "a header but no rows"),
        ("0, 70.89", NVIDIA_SMI_QUERY_FIELDS, "row 1 has 2 values for 12 fields"),
        ("x, 70.89", ("index", "power.draw"), "GPU index 'x'"),
        ("0, lots", ("index", "power.draw"), "GPU 0: power.draw: 'lots' is not a number"),
        ("0, 0xZZ", ("index", "clocks_event_reasons.active"), "is not a bitmask"),
        ("3/15 13:57, 0", ("timestamp", "index"), "is not %Y/%m/%d"),
    ],
)
def test_nvidia_smi_bad_output_names_the_problem(text, fields, match):
    with pytest.raises(TelemetryParseError, match=match):
        parse_nvidia_smi_csv(text, host="h", fields=fields, timestamp=T)


def test_nvidia_smi_truncated_real_row_is_refused():
    text = read("nvidia_smi_csv_nounits_4xh100.csv")
    with pytest.raises(TelemetryParseError, match="row 4 has"):
        parse_nvidia_smi_csv(text[: text.rindex(",")], host="h")


# --- dcgm-exporter ------------------------------------------------------------------------


def test_dcgm_exporter_mig_series_fold_into_one_sample_per_gpu():
    """2x A30 in MIG mode: every GPU instance repeats the device's power, temperature and
    energy counter; the energy is the freshest (largest) read, in mJ -> J; the host is the
    Hostname label."""
    samples = parse_dcgm_exporter(read("dcgm_exporter_a30_mig.prom"), timestamp=T)
    assert [(s.gpu, s.host) for s in samples] == [
        (0, "yg-data-k8s-gpu-a30-node-test-test0003.mt"),
        (1, "yg-data-k8s-gpu-a30-node-test-test0003.mt"),
    ]
    gpu0, gpu1 = samples
    assert (gpu0.power_w, gpu0.temp_gpu_c) == (52.636, 35.0)
    assert gpu0.energy_j == pytest.approx(126272106.318)
    assert (gpu1.power_w, gpu1.energy_j) == (56.121, pytest.approx(134473486.744))
    assert gpu0.timestamp_s == T and gpu0.source == "dcgm-exporter"


def test_dcgm_exporter_blank_sentinel_is_none():
    """The dcgm-exporter README's scrape: MEMORY_TEMP 9223372036854775794 is DCGM's
    NOT_SUPPORTED blank, not 9.2e18 °C."""
    (s,) = parse_dcgm_exporter(read("dcgm_exporter_readme_sample.prom"), timestamp=T, host="n1")
    assert (s.sm_clock_mhz, s.mem_clock_mhz, s.temp_mem_c) == (139.0, 405.0, None)
    assert s.host == "n1"


def test_dcgm_exporter_pcie_and_nvlink_rates():
    """NVIDIA's docs scrape of an A100 with a MIG instance: the device's PCIe rates (B/s,
    headers included) and its power; DGX-A100's NVLink rates from DCGM issue #149 (0 there:
    DCGM measures NVLink on Hopper and later), one sample per GPU."""
    (a100,) = parse_dcgm_exporter(read("dcgm_exporter_docs_a100_mig_pcie.prom"), timestamp=T)
    assert (a100.host, a100.gpu) == ("ub20-a100-k8s", 0)
    assert (a100.pcie_tx_bytes_per_s, a100.pcie_rx_bytes_per_s) == (33011804.0, 97863601.0)
    assert a100.power_w == 409.692 and a100.energy_j == pytest.approx(319159.391)
    assert a100.fabric_tx_bytes_per_s is None  # not in that scrape, not zero
    dgx = parse_dcgm_exporter(read("dcgm_exporter_dgx_a100_nvlink_issue149.prom"), timestamp=T)
    assert [s.gpu for s in dgx] == [0, 1, 2, 3] and {s.host for s in dgx} == {"axa"}
    assert {s.fabric_tx_bytes_per_s for s in dgx} == {0.0}
    assert {s.fabric_rx_bytes_per_s for s in dgx} == {None}


def test_dcgm_exporter_mig_framebuffer_is_not_the_device_memory():
    line = read("dcgm_exporter_a30_mig.prom").splitlines()[3]  # a GPU_I_ID="3" series
    fb = line.replace("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_FB_USED").replace("} 35", "} 5784")
    (s,) = parse_dcgm_exporter(fb, timestamp=T)
    assert s.mem_used_bytes is None
    whole = fb.replace(',GPU_I_PROFILE="1g.6gb",GPU_I_ID="3"', "")
    (s,) = parse_dcgm_exporter(whole, timestamp=T)
    assert s.mem_used_bytes == 5784 * MIB


@pytest.mark.parametrize(
    ("cut", "match"),
    [
        (lambda t: t[: t.index('Hostname="yg-data') + 20], "not Prometheus text"),
        (lambda t: "", "no samples"),
        (lambda t: "# HELP x y\nother_metric 1\n", "no DCGM_FI_DEV_\\* series"),
        (lambda t: t.replace('gpu="1"', 'gpu="one"'), "label gpu= 'one'"),
        (
            lambda t: t.replace(',Hostname="yg-data-k8s-gpu-a30-node-test-test0003.mt"', ""),
            "no host",
        ),
    ],
)
def test_dcgm_exporter_bad_output_names_the_problem(cut, match):
    with pytest.raises(TelemetryParseError, match=f"^dcgm-exporter: .*{match}"):
        parse_dcgm_exporter(cut(read("dcgm_exporter_a30_mig.prom")), timestamp=T)


# --- AMD Device Metrics Exporter ----------------------------------------------------------


def test_amd_exporter_clocks_and_xgmi_from_the_docs_example():
    """AMD's documented scrape: gpu_clock by clock_type (system -> GFX, memory -> memory;
    data/video/soc clocks are not kept, so GPUs 3 and 5 yield nothing), XGMI rx/tx summed
    over the 8 links, KB -> bytes."""
    (s,) = parse_amd_metrics_exporter(
        read("amd_metrics_exporter_docs_clock_xgmi.prom"), timestamp=T, host="mi300"
    )
    assert (s.gpu, s.sm_clock_mhz, s.mem_clock_mhz) == (0, 132.0, 900.0)
    rx = [0, 2.776148269e09, 2.914491813e09, 2.853215723e09, 2.857943554e09, 2.859773597e09]
    rx += [2.852296682e09, 2.757052542e09]
    assert s.fabric_rx_bytes == pytest.approx(sum(rx) * 1024)
    assert s.fabric_tx_bytes > s.fabric_rx_bytes
    assert s.power_w is None and s.host == "mi300"


def test_amd_exporter_energy_in_microjoules_and_hostname_label():
    (s,) = parse_amd_metrics_exporter(read("amd_metrics_exporter_vram_energy.prom"), timestamp=T)
    assert (s.host, s.gpu, s.energy_j) == ("cb76105c40d0", 0, 0.0)
    assert s.mem_used_bytes is None  # only free VRAM in the capture: used is not derived


def test_amd_exporter_average_power_stands_in_for_package_power():
    """AMD AI 395+ (APU) reports only gpu_average_package_power (here 0 W, as captured)."""
    (s,) = parse_amd_metrics_exporter(read("amd_metrics_exporter_apu_avg_power.prom"), timestamp=T)
    assert (s.host, s.power_w) == ("18ab41be1b15", 0.0)
    both = read("amd_metrics_exporter_apu_avg_power.prom") + (
        'gpu_package_power{gpu_id="0",hostname="18ab41be1b15"} 41\n'
    )
    (s,) = parse_amd_metrics_exporter(both, timestamp=T)
    assert s.power_w == 41.0


def test_amd_exporter_bad_output_names_the_problem():
    text = read("amd_metrics_exporter_vram_energy.prom")
    with pytest.raises(TelemetryParseError, match="^amd-metrics-exporter: not Prometheus text"):
        parse_amd_metrics_exporter(text[: text.index("16004") - 3], timestamp=T)
    with pytest.raises(TelemetryParseError, match="no gpu_\\* series"):
        parse_amd_metrics_exporter(text.replace("gpu_energy_consumed", "gpu_x"), timestamp=T)


# --- the sample model ---------------------------------------------------------------------


def test_sample_is_strict_and_frozen():
    s = GpuSample(source="rocm-smi", host="h", gpu=0, timestamp_s=T)
    with pytest.raises(ValidationError, match="frozen"):
        s.power_w = 1.0  # type: ignore[misc]
    with pytest.raises(ValidationError, match="extra"):
        GpuSample(source="rocm-smi", host="h", gpu=0, timestamp_s=T, watts=1.0)  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="greater than or equal to 0"):
        GpuSample(source="rocm-smi", host="h", gpu=-1, timestamp_s=T)


def test_every_sample_field_is_documented():
    undocumented = [name for name, field in GpuSample.model_fields.items() if not field.description]
    assert undocumented == []
