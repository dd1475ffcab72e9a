"""The sampler: the host source read for real on this machine, the vendor tools' streams
fed with real captures (tests/data/telemetry/, sources in tests/data/README.md), source
detection, a window's energy over what was sampled (covered, cut, incomplete), and the
runner's hook putting the figures into a sweep point's repeats."""

from __future__ import annotations

import io
import itertools
import json
import sys
import threading
import time
from pathlib import Path

import pytest

from pocforge.bench.summary import ClientHealth, PointSummary, RepeatResult
from pocforge.runner.telemetry import ServingTelemetry
from pocforge.stats import describe
from pocforge.telemetry.host import (
    CpuTimes,
    HostSample,
    PackageSample,
    RaplCounter,
    RaplZone,
    cpu_util_pct,
    parse_meminfo,
    parse_proc_stat,
    rapl_packages,
)
from pocforge.telemetry.parsers import (
    GpuSample,
    parse_dcgm_exporter,
)
from pocforge.telemetry.sampler import (
    AMD_SMI_CATEGORIES,
    CommandSource,
    HostSource,
    LoopSource,
    Sampler,
    ScrapeSource,
    detect,
    json_documents,
    read_amd_smi,
    read_nvidia_smi,
)
from pocforge.telemetry.series import Series, window
from tests.telemetry.captures import h100_noheader_lines, read

T = 1_764_590_400.0


# --- the host, for real ---------------------------------------------------------------------


def test_host_source_sampled_for_real(tmp_path):
    """Two seconds of this machine at 0.25 s: a line a reading, in time order at the
    interval, CPU busy share in [0, 100] that sees a thread spinning, memory as /proc says;
    no RAPL here (an empty powercap), so no package samples and no energy, said so."""
    path = tmp_path / "telemetry.jsonl"
    host = HostSource(powercap=tmp_path / "no-powercap")
    stop = threading.Event()

    def spin() -> None:  # one core busy for the second half
        time.sleep(1.0)
        while not stop.is_set():
            pass

    spinner = threading.Thread(target=spin)
    with Sampler(path, host="this-host", interval_s=0.25, sources=[host]) as sampler:
        spinner.start()
        time.sleep(2.0)
        stop.set()
        spinner.join()
        assert sampler.wait_until(time.time(), 2.0)
    end = sampler.end
    series = Series.read(path)

    assert series.meta.host == "this-host" and series.meta.interval_s == 0.25
    assert [s.name for s in series.meta.sources] == ["host"]
    assert "no RAPL" in series.meta.sources[0].detail
    assert "no-powercap" in series.meta.sources[0].detail
    assert series.unreadable == 0 and series.end == end
    samples = series.host
    assert 7 <= len(samples) <= 11
    gaps = [b.timestamp_s - a.timestamp_s for a, b in zip(samples, samples[1:], strict=False)]
    assert all(0.15 < g < 0.6 for g in gaps), gaps
    assert samples[0].cpu_util_pct is None  # needs two readings
    utils = [s.cpu_util_pct for s in samples[1:]]
    assert all(0.0 <= u <= 100.0 for u in utils)
    cpus = samples[0].cpu_count
    assert cpus >= 1 and max(utils[-3:]) >= 0.5 * 100 / cpus  # the spinning core shows
    used, total = parse_meminfo(Path("/proc/meminfo").read_text())
    assert samples[-1].mem_total_bytes == total
    assert abs(samples[-1].mem_used_bytes - used) < 0.2 * total
    assert series.gpu == [] and series.packages == []
    assert end.cost[0].samples == len(samples) and end.cost[0].cpu_s < 0.2
    win = window(series.gpu, series.packages, samples[1].timestamp_s, samples[-2].timestamp_s,
                 interval_s=0.25, output_tokens=100, gpu_count=1)  # fmt: skip
    assert win.energy is None and win.devices is None
    assert "no power source" in win.problem


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
    counter = RaplCounter(RaplZone(package=0, path=Path("/"), max_range_uj=999))
    assert counter.add(900) == 0.0
    assert counter.add(990) == pytest.approx(90e-6)
    assert counter.add(10) == pytest.approx(110e-6)  # 990 -> 999 -> 0 -> 10: 20 µJ more
    assert counter.add(500) == pytest.approx(600e-6)


def test_host_source_gives_package_energy_and_power(tmp_path):
    """Two readings of a package 2 s apart that spent 100 J: 50 W, and the window between
    them integrates the counter (a CPU-only node's energy)."""
    root = powercap_tree(tmp_path, {0: 5_000_000})
    source = HostSource(powercap=root)
    source._host = "cpu-node"
    first = list(source.poll(T))
    (root / "intel-rapl:0" / "energy_uj").write_text("105000000\n")
    second = list(source.poll(T + 2))
    (pkg0,) = [s for s in first if isinstance(s, PackageSample)]
    (pkg1,) = [s for s in second if isinstance(s, PackageSample)]
    assert (pkg0.energy_j, pkg0.power_w) == (0.0, None)
    assert (pkg1.energy_j, pkg1.power_w) == (pytest.approx(100.0), pytest.approx(50.0))
    assert source.info().detail.endswith("RAPL package energy (1 package)")
    win = window([], [pkg0, pkg1], T + 0.5, T + 1.5, interval_s=2.0, output_tokens=10,
                 gpu_count=1)  # fmt: skip
    assert win.devices == "cpu-package" and win.energy.valid
    (est,) = win.energy.per_gpu
    assert (est.device, est.method) == ("CPU package", "counter")
    assert win.energy.energy_j == pytest.approx(50.0)
    assert win.energy.joules_per_output_token == pytest.approx(5.0)


# --- the vendor tools' streams, on real captures ------------------------------------------


def test_nvidia_smi_loop_lines_become_samples():
    batches = list(read_nvidia_smi(io.StringIO("".join(h100_noheader_lines())), "h100"))
    samples = [s for batch in batches for s in batch]
    assert [s.gpu for s in samples] == [0, 1, 2, 3]
    assert [s.power_w for s in samples] == [70.89, 71.71, 70.78, 72.17]
    assert samples[1].timestamp_s - samples[0].timestamp_s == pytest.approx(0.024, abs=1e-3)
    (problem,) = list(read_nvidia_smi(io.StringIO("2024/03/15 13:57:59.791, 0, 70\n"), "h"))
    assert "3 values for 12 fields" in problem  # a cut line is a problem, not a crash


def test_amd_smi_watch_stream_is_split_into_documents(monkeypatch):
    """Watch mode prints a banner, then one JSON document an interval (amd-smi's
    CHANGELOG capture, printed twice here as two intervals would): each document becomes
    samples stamped when it was read, not with amd-smi's whole-second timestamp."""
    capture = json.loads(read("amd_smi_metric_power_json_changelog.json"))
    capture[0]["timestamp"] = 1_700_000_000  # what watch mode adds (int(time.time()))
    doc = json.dumps(capture, indent=4)
    stream = "'CTRL' + 'C' to stop watching output:\n" + doc + "\n" + doc + "\n"
    ticks = itertools.count()
    monkeypatch.setattr(time, "time", lambda: T + next(ticks))
    batches = [b for b in read_amd_smi(io.StringIO(stream), "mi300x") if isinstance(b, list)]
    assert [len(b) for b in batches] == [1, 1]
    first, second = batches[0][0], batches[1][0]
    assert (first.power_w, first.throttle) == (10.0, ())
    assert T <= first.timestamp_s < second.timestamp_s  # the read times, not 1_700_000_000


def test_json_documents_waits_for_the_rest_of_a_document():
    text = json.dumps([{"gpu": 0}], indent=4)
    docs, rest, skipped = json_documents("banner\n" + text[:10])
    assert (docs, skipped) == ([], ["banner"]) and rest == text[:10]
    docs, rest, _ = json_documents(rest + text[10:] + "\n[1]")
    assert docs == [[{"gpu": 0}], [1]] and rest == ""


@pytest.mark.process
def test_a_looping_tool_process_is_read_as_it_prints(tmp_path):
    """A stand-in for nvidia-smi -lms that prints the H100 rows, then one per 0.1 s: the
    sampler reads them while the tool runs, stops it, and counts its CPU."""
    lines = h100_noheader_lines()
    script = (
        "import sys, time\n"
        f"lines = {lines!r}\n"
        "sys.stdout.write(''.join(lines)); sys.stdout.flush()\n"
        "while True:\n"
        "    time.sleep(0.1); sys.stdout.write(lines[0]); sys.stdout.flush()\n"
    )
    tool = LoopSource("nvidia-smi", [sys.executable, "-c", script], read_nvidia_smi)
    path = tmp_path / "t.jsonl"
    with Sampler(path, host="h100", interval_s=0.1, sources=[tool]) as sampler:
        deadline = time.time() + 10
        while len(sampler.gpu) < 8 and time.time() < deadline:
            time.sleep(0.05)
    series = Series.read(path)
    assert len(series.gpu) >= 8 and {s.gpu for s in series.gpu} == {0, 1, 2, 3}
    assert series.meta.sources[0].command[0] == sys.executable
    assert sampler.end.cost[0].tool_cpu_s is not None
    assert tool._proc.poll() is not None  # stopped


@pytest.mark.process
def test_exporter_scrape_and_a_failing_command(tmp_path):
    """dcgm-exporter's README sample served on a local port is scraped once an interval;
    a tool that exits non-zero becomes problem lines, and sampling goes on."""
    from http.server import BaseHTTPRequestHandler, HTTPServer

    body = read("dcgm_exporter_readme_sample.prom").encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/metrics"
    scrape = ScrapeSource(
        "dcgm-exporter",
        url,
        lambda text, host, now: parse_dcgm_exporter(text, timestamp=now, host=host),
    )
    failing = CommandSource(
        "rocm-smi", [sys.executable, "-c", "raise SystemExit(3)"], lambda *_: []
    )
    try:
        with Sampler(tmp_path / "t.jsonl", host="n", interval_s=0.2, sources=[scrape, failing]):
            time.sleep(0.7)
    finally:
        server.shutdown()
    series = Series.read(tmp_path / "t.jsonl")
    assert len(series.gpu) >= 3 and series.gpu[0].sm_clock_mhz == 139
    assert series.gpu[0].temp_mem_c is None  # DCGM's blank
    assert series.problems and all(p.source == "rocm-smi" for p in series.problems)
    assert "exit 3" in series.problems[0].message


# --- detection --------------------------------------------------------------------------------


def test_detect_picks_each_vendors_first_source(tmp_path):
    def which(tools):
        return lambda name: f"/x/{name}" if name in tools else None

    none = tmp_path / "no-powercap"
    found, not_used = detect(1.0, which=which({"amd-smi", "rocm-smi"}), probe=lambda u: True,
                             powercap=none)  # fmt: skip
    names = [s.name for s in found]
    assert names == ["host", *["amd-smi"] * len(AMD_SMI_CATEGORIES), "dcgm-exporter"]
    commands = [s.info().command for s in found if s.name == "amd-smi"]
    assert ["/x/amd-smi", "metric", "--power", "--json", "--watch", "1"] in commands
    found, _ = detect(0.5, which=which({"rocm-smi", "nvidia-smi"}), probe=lambda u: False,
                      powercap=none)  # fmt: skip
    assert [s.name for s in found] == ["host", "rocm-smi", "nvidia-smi"]
    nvidia = found[-1]
    assert nvidia.info().command[-2:] == ["-lms", "500"] and nvidia.env == {"TZ": "UTC"}
    found, not_used = detect(1.0, which=which(set()), probe=lambda u: False, powercap=none)
    assert [s.name for s in found] == ["host"] or Path("/opt/rocm/bin/amd-smi").exists()
    assert any(w.startswith("AMD: no amd-smi") for w in not_used)
    assert any(w.startswith("NVIDIA: no nvidia-smi") for w in not_used)


# --- a window's energy ----------------------------------------------------------------------


def gpu_series(times, power=None, energy=None, gpu=0):
    return [
        GpuSample(
            source="amd-smi",
            host="n",
            gpu=gpu,
            timestamp_s=t,
            power_w=power,
            energy_j=None if energy is None else energy * (t - T),
        )  # fmt: skip
        for t in times
    ]


def test_window_prefers_the_counter_even_from_separate_category_samples():
    """amd-smi's power and energy categories arrive as separate samples of one GPU: the
    counter samples decide (400 W for 5 s = 2000 J), the power samples (300 W) are unused."""
    times = [T + i for i in range(-1, 8)]
    samples = gpu_series(times, power=300.0) + gpu_series([t + 0.3 for t in times], energy=400.0)
    win = window(samples, [], T, T + 5, interval_s=1.0, output_tokens=1000, gpu_count=1)
    assert win.energy.valid and win.energy.per_gpu[0].method == "counter"
    assert win.energy.energy_j == pytest.approx(2000.0)
    assert win.energy.joules_per_output_token == pytest.approx(2.0)
    assert win.energy.output_tokens_per_s_per_kw == pytest.approx(200 / 0.4)


def test_a_window_the_samples_do_not_cover_is_invalid_not_guessed():
    """The sampler died 2 s into a 5 s window: no figures, and the reason."""
    samples = gpu_series([T + i for i in range(-1, 3)], power=300.0)
    win = window(samples, [], T, T + 5, interval_s=1.0, output_tokens=1000, gpu_count=1)
    assert not win.energy.valid and win.energy.energy_j is None
    assert "last sample" in win.problem and "before the window end" in win.problem


def test_telemetry_for_fewer_gpus_than_serve_is_invalid():
    samples = gpu_series([T + i for i in range(-1, 7)], power=300.0)
    win = window(samples, [], T, T + 5, interval_s=1.0, output_tokens=1000, gpu_count=2)
    assert not win.energy.valid and "telemetry for 1 of 2 GPUs" in win.problem


def test_gpus_win_over_cpu_packages_and_no_power_is_said():
    """A GPU node's energy is its GPUs' (RAPL is recorded, not added); a GPU tool that
    reports no power ([N/A], GB10) gives no figures."""
    times = [T + i for i in range(-1, 7)]
    packages = [PackageSample(host="n", package=0, timestamp_s=t, energy_j=50.0 * (t - T + 1))
                for t in times]  # fmt: skip
    win = window(gpu_series(times, 200.0), packages, T, T + 5, interval_s=1.0,
                 output_tokens=10, gpu_count=1)  # fmt: skip
    assert win.devices == "gpu" and win.energy.avg_power_w == pytest.approx(200.0)
    win = window(gpu_series(times), packages, T, T + 5, interval_s=1.0, output_tokens=10,
                 gpu_count=1)  # fmt: skip
    assert not win.energy.valid and "no power readings" in win.problem


# --- the runner's hook around a sweep point -------------------------------------------------


class ConstantGpus(LoopSource):
    """A stand-in GPU tool: two GPUs at 250 W each, sampled by a thread every interval."""

    def __init__(self) -> None:
        super().__init__("amd-smi", ["stand-in"], read_amd_smi)
        self._stop = threading.Event()

    def start(self, emit, host, interval_s) -> None:
        self._emit, self._host = emit, host

        def run() -> None:
            while not self._stop.is_set():
                now = time.time()
                self._samples(
                    GpuSample(source="amd-smi", host=host, gpu=g, timestamp_s=now, power_w=250.0)
                    for g in range(2)
                )
                self._stop.wait(interval_s)

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def repeat(n: int, start: float, duration: float, tok_s: float) -> RepeatResult:
    empty = describe([])
    client = ClientHealth(limited=False, loop_lag_ms=empty, send_delay_ms=empty, cpu_s=0,
                          cpu_utilisation=0)  # fmt: skip
    return RepeatResult(repeat=n, status="ok", started_at="", duration_s=duration,
                        started_unix_s=start, requests_sent=1, completed=1, failed=0,
                        offered_rate=None, achieved_rate=None, peak_concurrency=1,
                        metrics={"output_throughput": tok_s}, client=client)  # fmt: skip


def test_hook_puts_energy_into_the_points_repeats(tmp_path):
    """Two GPUs at 250 W for a 0.6 s repeat producing 100 tok/s: 500 W, 5 J per token,
    200 tok/s per kW, and at $2/GPU-hour 2 × 0.6/3600 × 2 / (60/10^6) $ per million."""
    hook = ServingTelemetry(tmp_path, gpus=2, price=2.0, say=lambda _: None, interval_s=0.1,
                            sources=lambda i: ([ConstantGpus()], []))  # fmt: skip
    point = PointSummary(id="c4", mode="concurrency", value=4, status="ok",
                         records_file="requests-c4.jsonl", repeats=[])  # fmt: skip
    hook.before(point)
    start = time.time() + 0.1
    time.sleep(0.8)
    point.repeats.append(repeat(0, start, 0.6, 100.0))
    hook.after(point)
    metrics = point.repeats[0].metrics
    assert metrics["avg_power_w"] == pytest.approx(500.0)
    assert metrics["joules_per_token"] == pytest.approx(5.0)
    assert metrics["tokens_per_s_per_kw"] == pytest.approx(200.0)
    assert metrics["usd_per_million_tokens"] == pytest.approx(2 * 0.6 / 3600 * 2 / 60e-6)
    assert point.telemetry_file == "telemetry-c4.jsonl" and point.notes == []
    (win,) = Series.read(tmp_path / point.telemetry_file).windows
    assert win.repeat == 0 and win.energy.valid and hook.sampler is None


def test_hook_on_a_node_without_power_adds_no_energy_and_says_why(tmp_path):
    """This machine: the host only, no RAPL. The price still gives $ per million tokens."""
    hook = ServingTelemetry(tmp_path, gpus=1, price=1.0, say=lambda _: None, interval_s=0.1,
                            sources=lambda i: ([HostSource(powercap=tmp_path / "none")], []))  # fmt: skip
    point = PointSummary(id="c1", mode="concurrency", value=1, status="ok",
                         records_file="requests-c1.jsonl", repeats=[])  # fmt: skip
    hook.before(point)
    start = time.time() + 0.1
    time.sleep(0.5)
    point.repeats.append(repeat(0, start, 0.3, 50.0))
    hook.after(point)
    assert set(point.repeats[0].metrics) == {"output_throughput", "usd_per_million_tokens"}
    assert point.notes == ["energy not measured: no power source on the node (no GPU tool, "
                           "no readable RAPL)"]  # fmt: skip
    assert Series.read(tmp_path / "telemetry-c1.jsonl").host


def test_series_skips_a_cut_last_line(tmp_path):
    path = tmp_path / "t.jsonl"
    sample = HostSample(host="n", timestamp_s=T, cpu_util_pct=3.0)
    path.write_text(json.dumps({"kind": "host", **sample.model_dump()}) + '\n{"kind": "gp')
    series = Series.read(path)
    assert series.host == [sample] and series.unreadable == 1
