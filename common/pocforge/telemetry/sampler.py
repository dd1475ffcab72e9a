"""The sampler: a node's telemetry at a set interval while a benchmark runs, as a JSONL series.

:class:`Sampler` runs every source in threads of its own (and, for the vendor tools, in the
tool's own looping process), so the benchmark it watches is never blocked: the load
generator's event loop never waits on a read, and a tool that hangs or dies costs a line
in the series, not the run. It writes one file, one JSON object a line, each with a
``kind``:

- ``meta`` (first): the host, the interval, the sources used (their commands or URLs) and
  why the others were not (:func:`detect`);
- ``gpu``: a :class:`~pocforge.telemetry.parsers.GpuSample`; ``host``: a
  :class:`~pocforge.telemetry.host.HostSample`; ``rapl``: a
  :class:`~pocforge.telemetry.host.PackageSample`;
- ``problem``: a source's failure (unparseable output, the tool exiting), with its time;
- ``window`` (appended by whoever ran the benchmark): a measured window and its energy;
- ``end`` (last): when sampling stopped and what it cost (CPU seconds per source).

Sources, whichever the node has, in this order (the first found of each vendor's chain):

- AMD: ``amd-smi metric --<category> --json --watch N``, one process per category (a
  combined query is known to break amd-smi's CSV output, and one category failing leaves
  the others); else the AMD Device Metrics Exporter's ``/metrics``; else ``rocm-smi
  --json``, run once per interval (it has no loop mode; older stacks only).
- NVIDIA: ``nvidia-smi --query-gpu=… --format=csv,noheader,nounits -lms N`` (its own
  loop, timestamps to the millisecond, ``TZ=UTC``); else dcgm-exporter's ``/metrics``.
- Always the host: CPU utilisation and memory from ``/proc``, and CPU package energy from
  RAPL where ``/sys/class/powercap`` has readable package zones.

Every sample is stamped with the Unix time it was read (nvidia-smi's own timestamp where it
prints one), the clock the benchmark's windows are in.
"""

from __future__ import annotations

import abc
import json
import os
import shutil
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC
from pathlib import Path
from typing import IO, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pocforge.telemetry import host as host_readings
from pocforge.telemetry.host import HostSample, PackageSample, RaplCounter
from pocforge.telemetry.parsers import (
    NVIDIA_SMI_ARGS,
    NVIDIA_SMI_QUERY_FIELDS,
    GpuSample,
    TelemetryParseError,
    parse_amd_metrics_exporter,
    parse_amd_smi_metric_json,
    parse_dcgm_exporter,
    parse_nvidia_smi_csv,
    parse_rocm_smi_json,
)

# the node recorder's (standard library only), shared
from pocforge.telemetry.recorder import find_tool, process_cpu_s

DEFAULT_INTERVAL_S = 1.0
# amd-smi metric categories, each its own process (amdsmi_cli/amdsmi_parser.py flags).
AMD_SMI_CATEGORIES = ("power", "energy", "usage", "mem-usage", "clock", "temperature")
ROCM_SMI_ARGS = (
    "--showpower",
    "--showuse",
    "--showmemuse",
    "--showtemp",
    "--showmeminfo",
    "vram",
    "--json",
)
AMD_EXPORTER_URL = "http://127.0.0.1:5000/metrics"  # the exporter's default port
DCGM_EXPORTER_URL = "http://127.0.0.1:9400/metrics"
MAX_PROBLEMS = 20  # per source: a tool failing every second would otherwise fill the file
MAX_JSON_BUFFER = 4 << 20  # a "document" longer than this is not one: drop it and say so


class SourceInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="host, amd-smi, amd-metrics-exporter, rocm-smi, nvidia-smi…")
    detail: str = ""
    command: list[str] | None = None
    url: str | None = None


class Meta(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["meta"] = "meta"
    host: str
    interval_s: float
    started_s: float
    sources: list[SourceInfo]
    not_used: list[str] = Field(
        default_factory=list, description="Sources looked for and why they were not used."
    )


class Problem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["problem"] = "problem"
    source: str
    timestamp_s: float
    message: str


class SourceCost(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str
    samples: int
    cpu_s: float = Field(description="CPU time of the sampler's own thread for this source.")
    tool_cpu_s: float | None = Field(
        None, description="CPU time of the tool's process (looping sources), where readable."
    )


class End(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["end"] = "end"
    stopped_s: float
    wall_s: float
    cost: list[SourceCost]

    @property
    def cpu_pct_of_core(self) -> float:
        """The sampler's CPU (its threads and the tools' processes) / wall time, %."""
        spent = sum(c.cpu_s + (c.tool_cpu_s or 0.0) for c in self.cost)
        return 100.0 * spent / self.wall_s if self.wall_s > 0 else 0.0


Emit = Callable[[BaseModel], None]
# a sample's line names its kind; the other lines' models carry their own
SAMPLE_KINDS = {"GpuSample": "gpu", "HostSample": "host", "PackageSample": "rapl"}


def line(item: BaseModel) -> str:
    """One line of a telemetry file (what :class:`pocforge.telemetry.series.Series` reads)."""
    data = item.model_dump(mode="json", exclude_none=True)
    kind = SAMPLE_KINDS.get(type(item).__name__)
    if kind is not None:
        data = {"kind": kind, **data}
    return json.dumps(data, separators=(",", ":")) + "\n"


# --------------------------------------------------------------------------- sources


class Source(abc.ABC):
    """One source: started with the sampler's emit callback, stopped at the end."""

    name = "source"

    def __init__(self) -> None:
        self.samples = 0
        self.cpu_s = 0.0
        self.tool_cpu_s: float | None = None
        self.last_s: float | None = None  # time of the newest sample
        self._problems = 0
        self._emit: Emit | None = None
        self._host = ""

    def info(self) -> SourceInfo:
        return SourceInfo(name=self.name)

    @abc.abstractmethod
    def start(self, emit: Emit, host: str, interval_s: float) -> None:
        """Begin sampling in the background, handing every sample to ``emit``."""

    @abc.abstractmethod
    def stop(self) -> None:
        """Stop sampling and release what ``start`` took (threads, the tool's process)."""

    def _samples(self, samples: Iterable[BaseModel]) -> None:
        for sample in samples:
            self.samples += 1
            self.last_s = max(self.last_s or 0.0, sample.timestamp_s)  # type: ignore[attr-defined]
            if self._emit:
                self._emit(sample)

    def _problem(self, message: str) -> None:
        self._problems += 1
        if self._problems <= MAX_PROBLEMS and self._emit:
            suffix = " (further problems of this source not recorded)"
            text = message + (suffix if self._problems == MAX_PROBLEMS else "")
            self._emit(Problem(source=self.name, timestamp_s=time.time(), message=text))


class PolledSource(Source):
    """A source read once per interval by a thread of its own."""

    def __init__(self) -> None:
        super().__init__()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @abc.abstractmethod
    def poll(self, now: float) -> Iterable[BaseModel]:
        """This interval's samples (one read of the source)."""

    def start(self, emit: Emit, host: str, interval_s: float) -> None:
        self._emit, self._host = emit, host
        self._thread = threading.Thread(
            target=self._run, args=(interval_s,), name=f"telemetry-{self.name}", daemon=True
        )
        self._thread.start()

    def _run(self, interval_s: float) -> None:
        due = time.monotonic()
        try:
            while not self._stop.is_set():
                try:
                    self._samples(self.poll(time.time()))
                except (OSError, ValueError, subprocess.SubprocessError) as exc:
                    self._problem(f"{type(exc).__name__}: {exc}")
                due += interval_s
                delay = due - time.monotonic()
                if delay < 0:  # a slow read: skip the missed ticks rather than bunch them
                    due, delay = time.monotonic(), 0.0
                self._stop.wait(delay)
        finally:
            self.cpu_s = time.thread_time()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)


class HostSource(PolledSource):
    """CPU utilisation and memory from ``/proc``, package energy from RAPL."""

    name = "host"

    def __init__(self, proc: Path = Path("/proc"), powercap: Path = host_readings.POWERCAP):
        super().__init__()
        self.proc = proc
        zones, self.rapl_problems = host_readings.rapl_packages(powercap)
        self.counters = {z.package: RaplCounter(z) for z in zones}
        self._previous_stat: host_readings.CpuTimes | None = None
        self._previous_energy: dict[int, tuple[float, float]] = {}

    def info(self) -> SourceInfo:
        rapl = (
            f"RAPL package energy ({len(self.counters)} package"
            f"{'s' if len(self.counters) != 1 else ''})"
            if self.counters
            else "no RAPL package energy (" + "; ".join(self.rapl_problems) + ")"
        )
        return SourceInfo(name=self.name, detail=f"{self.proc}/stat, {self.proc}/meminfo; {rapl}")

    def poll(self, now: float) -> Iterator[BaseModel]:
        stat = host_readings.parse_proc_stat((self.proc / "stat").read_text())
        meminfo = (self.proc / "meminfo").read_text()
        yield host_readings.host_sample(self._host, now, stat, self._previous_stat, meminfo)
        self._previous_stat = stat
        if self.counters:
            packages = host_readings.package_samples(
                self._host, now, self.counters, self._previous_energy
            )
            for p in packages:
                self._previous_energy[p.package] = (p.timestamp_s, p.energy_j)
            yield from packages


class CommandSource(PolledSource):
    """A tool without a loop mode, run once per interval (rocm-smi)."""

    def __init__(self, name: str, argv: list[str], parse: Callable[[str, str, float], list]):
        super().__init__()
        self.name, self.argv, self.parse = name, argv, parse
        self.tool_cpu_s = 0.0

    def info(self) -> SourceInfo:
        return SourceInfo(name=self.name, command=self.argv, detail="run once per interval")

    def poll(self, now: float) -> list:
        # os.times counts every child the process reaped meanwhile: an upper bound
        before = os.times()
        done = subprocess.run(self.argv, capture_output=True, text=True, timeout=30)
        after = os.times()
        spent = after.children_user - before.children_user
        spent += after.children_system - before.children_system
        self.tool_cpu_s = (self.tool_cpu_s or 0.0) + spent
        if done.returncode != 0:
            raise OSError(f"exit {done.returncode}: {done.stderr.strip()[:200]}")
        try:
            return self.parse(done.stdout, self._host, now)
        except TelemetryParseError as exc:
            raise ValueError(str(exc)) from None


class ScrapeSource(PolledSource):
    """A Prometheus exporter's ``/metrics``, fetched once per interval."""

    def __init__(self, name: str, url: str, parse: Callable[[str, str, float], list]):
        super().__init__()
        self.name, self.url, self.parse = name, url, parse

    def info(self) -> SourceInfo:
        return SourceInfo(name=self.name, url=self.url, detail="scraped once per interval")

    def poll(self, now: float) -> list:
        with urllib.request.urlopen(self.url, timeout=5) as resp:  # noqa: S310 (a local URL)
            text = resp.read().decode("utf-8", "replace")
        try:
            return self.parse(text, self._host, now)
        except TelemetryParseError as exc:
            raise ValueError(str(exc)) from None


def json_documents(buffer: str) -> tuple[list[Any], str, list[str]]:
    """The whole JSON documents at the start of ``buffer`` (a stream of them, as amd-smi's
    watch mode prints one per interval), what is left of it, and text that was skipped
    (lines before a document, such as watch mode's "'CTRL' + 'C' to stop" banner)."""
    decoder = json.JSONDecoder()
    docs, skipped = [], []
    while True:
        buffer = buffer.lstrip()
        if not buffer:
            return docs, "", skipped
        if buffer[0] not in "[{":
            line, newline, rest = buffer.partition("\n")
            if not newline:
                return docs, buffer, skipped  # the line is not complete yet
            skipped.append(line)
            buffer = rest
            continue
        try:
            doc, end = decoder.raw_decode(buffer)
        except json.JSONDecodeError:
            if len(buffer) > MAX_JSON_BUFFER:
                skipped.append(f"{len(buffer)} characters that are not a JSON document")
                return docs, "", skipped
            return docs, buffer, skipped  # incomplete: wait for the rest
        docs.append(doc)
        buffer = buffer[end:]


class LoopSource(Source):
    """A tool that loops by itself (nvidia-smi ``-lms``, amd-smi ``--watch``): one process
    for the whole sampling, its stdout read by a thread as it prints."""

    def __init__(
        self,
        name: str,
        argv: list[str],
        read: Callable[[IO[str], str], Iterator[list]],
        env: dict[str, str] | None = None,
        detail: str = "",
    ):
        super().__init__()
        self.name, self.argv, self.read, self.env, self.detail = name, argv, read, env, detail
        self._proc: subprocess.Popen | None = None
        self._thread: threading.Thread | None = None

    def info(self) -> SourceInfo:
        return SourceInfo(name=self.name, command=self.argv, detail=self.detail)

    def start(self, emit: Emit, host: str, interval_s: float) -> None:
        self._emit, self._host = emit, host
        env = {**os.environ, **(self.env or {})}
        self._proc = subprocess.Popen(
            self.argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        self._thread = threading.Thread(
            target=self._run, name=f"telemetry-{self.name}", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        try:
            for batch in self.read(self._proc.stdout, self._host):
                if isinstance(batch, str):
                    self._problem(batch)
                else:
                    self._samples(batch)
            code = self._proc.poll()
            if code not in (None, 0, -15):
                self._problem(f"{self.argv[0]} exited with {code}")
        finally:
            self.cpu_s = time.thread_time()

    def stop(self) -> None:
        if self._proc is None:
            return
        self.tool_cpu_s = process_cpu_s(self._proc.pid)
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if self._thread is not None:
            self._thread.join(timeout=10)


def read_nvidia_smi(stream: IO[str], host: str) -> Iterator[list | str]:
    """Rows of ``nvidia-smi`` :data:`NVIDIA_SMI_ARGS` looping, one GPU a line."""
    for line in stream:
        if not line.strip():
            continue
        try:
            yield parse_nvidia_smi_csv(line, host=host, fields=NVIDIA_SMI_QUERY_FIELDS, tz=UTC)
        except TelemetryParseError as exc:
            yield str(exc)


def read_amd_smi(stream: IO[str], host: str) -> Iterator[list | str]:
    """The documents of ``amd-smi metric --json --watch``, each stamped when it was read."""
    buffer = ""
    for line in stream:
        buffer += line
        docs, buffer, skipped = json_documents(buffer)
        now = time.time()
        for text in skipped:
            if "CTRL" not in text:  # watch mode's banner is expected
                yield f"amd-smi: not JSON: {text[:200]}"
        for doc in docs:
            try:
                yield parse_amd_smi_metric_json(
                    json.dumps(doc), host=host, timestamp=now, output_time=False
                )
            except TelemetryParseError as exc:
                yield str(exc)


def _rocm_smi(text: str, host: str, now: float) -> list[GpuSample]:
    start = text.find("{")  # rocm-smi may print warnings before its JSON
    return parse_rocm_smi_json(text[start:] if start >= 0 else text, host=host, timestamp=now)


def _amd_exporter(text: str, host: str, now: float) -> list[GpuSample]:
    return parse_amd_metrics_exporter(text, timestamp=now, host=host)


def _dcgm_exporter(text: str, host: str, now: float) -> list[GpuSample]:
    return parse_dcgm_exporter(text, timestamp=now, host=host)


# a polled source's name -> its parser of one read's text (what a node's recorder read)
POLLED_PARSERS: dict[str, Callable[[str, str, float], list[GpuSample]]] = {
    "rocm-smi": _rocm_smi,
    "amd-metrics-exporter": _amd_exporter,
    "dcgm-exporter": _dcgm_exporter,
}


# --------------------------------------------------------------------------- detection


def _probe(url: str) -> bool:
    """Whether ``url`` answers with Prometheus text (a quick GET; no exporter: False)."""
    try:
        with urllib.request.urlopen(url, timeout=1) as resp:  # noqa: S310 (a local URL)
            return resp.status == 200
    except (OSError, ValueError):
        return False


def detect(
    interval_s: float = DEFAULT_INTERVAL_S,
    *,
    which: Callable[[str], str | None] = shutil.which,
    probe: Callable[[str], bool] = _probe,
    amd_exporter_url: str = AMD_EXPORTER_URL,
    dcgm_exporter_url: str = DCGM_EXPORTER_URL,
    proc: Path = Path("/proc"),
    powercap: Path = host_readings.POWERCAP,
) -> tuple[list[Source], list[str]]:
    """The sources this node has, in the order of the module notes, and why others were
    not used. The host source is always there."""
    host = HostSource(proc, powercap)
    sources: list[Source] = [host]
    not_used = list(host.rapl_problems)
    seconds = max(1, round(interval_s))  # amd-smi's --watch takes whole seconds

    amd_smi = find_tool("amd-smi", which=which)
    if amd_smi:
        for category in AMD_SMI_CATEGORIES:
            argv = [amd_smi, "metric", f"--{category}", "--json", "--watch", str(seconds)]
            sources.append(LoopSource("amd-smi", argv, read_amd_smi, detail=category))
    elif probe(amd_exporter_url):
        sources.append(ScrapeSource("amd-metrics-exporter", amd_exporter_url, _amd_exporter))
    elif rocm_smi := find_tool("rocm-smi", which=which):
        sources.append(CommandSource("rocm-smi", [rocm_smi, *ROCM_SMI_ARGS], _rocm_smi))
    else:
        not_used.append(
            f"AMD: no amd-smi or rocm-smi, no Device Metrics Exporter at {amd_exporter_url}"
        )

    nvidia_smi = find_tool("nvidia-smi", which=which)
    if nvidia_smi:
        ms = max(1, round(interval_s * 1000))
        argv = [nvidia_smi, *NVIDIA_SMI_ARGS, "-lms", str(ms)]
        sources.append(LoopSource("nvidia-smi", argv, read_nvidia_smi, env={"TZ": "UTC"}))
    elif probe(dcgm_exporter_url):
        sources.append(ScrapeSource("dcgm-exporter", dcgm_exporter_url, _dcgm_exporter))
    else:
        not_used.append(f"NVIDIA: no nvidia-smi, no dcgm-exporter at {dcgm_exporter_url}")
    return sources, not_used


# --------------------------------------------------------------------------- the sampler


class Sampler:
    """Sample ``sources`` (default: :func:`detect`) every ``interval_s`` into ``path``.

    Use as a context manager, or :meth:`start` and :meth:`stop`. Samples are also kept in
    memory (``gpu``, ``host``, ``packages``) for whoever integrates them afterwards.
    """

    def __init__(
        self,
        path: Path,
        *,
        host: str | None = None,
        interval_s: float = DEFAULT_INTERVAL_S,
        sources: list[Source] | None = None,
        not_used: list[str] | None = None,
    ) -> None:
        if interval_s <= 0:
            raise ValueError(f"sampling interval {interval_s} is not positive")
        self.path = Path(path)
        self.host = host or os.uname().nodename
        self.interval_s = interval_s
        if sources is None:
            sources, found_not_used = detect(interval_s)
            not_used = (not_used or []) + found_not_used
        self.sources = sources
        self.not_used = not_used or []
        self.gpu: list[GpuSample] = []
        self.host_samples: list[HostSample] = []
        self.packages: list[PackageSample] = []
        self.problems: list[Problem] = []
        self.end: End | None = None
        self._lock = threading.Lock()
        self._fh: IO[str] | None = None
        self._started = 0.0

    def add(self, item: BaseModel) -> None:
        """Append a line to the series: a sample (kept in memory too), a problem, or a
        measured window of the caller's. The sources call this from their threads."""
        with self._lock:
            if isinstance(item, GpuSample):
                self.gpu.append(item)
            elif isinstance(item, HostSample):
                self.host_samples.append(item)
            elif isinstance(item, PackageSample):
                self.packages.append(item)
            elif isinstance(item, Problem):
                self.problems.append(item)
            self._write(item)

    def _write(self, item: BaseModel) -> None:
        if self._fh is not None:
            self._fh.write(line(item))
            self._fh.flush()

    def start(self) -> Sampler:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = self.path.open("a", encoding="utf-8")
        self._started = time.time()
        meta = Meta(
            host=self.host,
            interval_s=self.interval_s,
            started_s=self._started,
            sources=[s.info() for s in self.sources],
            not_used=self.not_used,
        )
        with self._lock:
            self._write(meta)
        for source in self.sources:
            try:
                source.start(self.add, self.host, self.interval_s)
            except OSError as exc:  # the tool cannot be started: a line, not a failure
                source._problem(f"cannot start: {exc}")
        return self

    def wait_until(self, t: float, timeout_s: float) -> bool:
        """Wait (up to ``timeout_s``) until every running source has a sample at or after
        Unix time ``t``; whether they all did. A source that never produced one (a tool
        that failed to start) is not waited for once it has had a problem."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            waiting = [
                s
                for s in self.sources
                if (s.last_s is None or s.last_s < t) and not (s.last_s is None and s._problems)
            ]
            if not waiting:
                return True
            time.sleep(min(0.05, self.interval_s / 10))
        return False

    def snapshot(self) -> tuple[list[GpuSample], list[PackageSample]]:
        """Copies of the GPU and CPU package samples so far (the sources keep appending)."""
        with self._lock:
            return list(self.gpu), list(self.packages)

    def stop(self) -> End:
        for source in self.sources:
            source.stop()
        stopped = time.time()
        self.end = End(
            stopped_s=stopped,
            wall_s=stopped - self._started,
            cost=[
                SourceCost(
                    source=s.name
                    + (f" {s.detail}" if isinstance(s, LoopSource) and s.detail else ""),
                    samples=s.samples,
                    cpu_s=s.cpu_s,
                    tool_cpu_s=s.tool_cpu_s,
                )
                for s in self.sources
            ],
        )
        with self._lock:
            self._write(self.end)
            if self._fh is not None:
                self._fh.close()
                self._fh = None
        return self.end

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self.end is None:
            self.stop()
