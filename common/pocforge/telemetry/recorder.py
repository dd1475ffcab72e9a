"""The kit's one telemetry engine: every source a machine has, recorded raw while a workload runs.

It runs two ways, on the same plan (:func:`pocforge.telemetry.sources.recorder_plan`):

- on a cluster node, copied there by the workload role beside the kit's process manager and
  run before the node's launches::

      python3 recorder.py telemetry.plan.json     # record until SIGTERM (collect.yml sends it)

- on this machine, in the kit's own process, around each benchmark point and the training
  run (:mod:`pocforge.runner.telemetry`): ``Recorder(plan).start()``, ``wait_until``,
  ``stop()``.

Like ``process.py`` it imports nothing but the standard library: a node needs no kit
installed, only the ``python3`` Ansible already uses and its vendor's tools on the host (a
framework in a container still leaves ``amd-smi`` and ``nvidia-smi`` on the host). It does
no parsing: each source's output is written as it was printed, stamped with the Unix time
it was read, and the kit turns the file into its telemetry series with the parsers tested
on real captures (:func:`pocforge.telemetry.reader.read_raw`), so there is one parser of
each tool's output and a tool that prints something new loses nothing.

Lines, each a JSON object with a ``kind``:

- ``meta`` (first): host, CPUs, interval, the sources used (their commands or URLs) and why
  the others were not;
- ``raw``: ``source``, ``detail`` (amd-smi's category), ``t``, ``text``: one line a looping
  tool printed (``nvidia-smi -lms``), one whole JSON document of a tool that prints a
  stream of them (a source framed ``json``: ``amd-smi metric --json --watch``; text between
  documents comes with ``skipped``), or one read of a polled source (``rocm-smi``, an
  exporter's ``/metrics``);
- ``host``: ``t``, ``stat`` (``/proc/stat``'s ``cpu`` line), ``meminfo`` (its MemTotal and
  MemAvailable lines), ``rapl`` (package -> ``energy_uj``) and, in the first,
  ``rapl_max_uj`` (package -> ``max_energy_range_uj``);
- ``problem``: a source's failure (a tool that exits, a read that fails), with its time, at
  most :data:`MAX_PROBLEMS` per source;
- ``end`` (last): when recording stopped and, per source, its records and the CPU it cost
  (its thread's, and its tool's process where it loops).

Which sources: for each vendor's chain in the plan (AMD: amd-smi, the Device Metrics
Exporter, rocm-smi; NVIDIA: nvidia-smi, dcgm-exporter), the first the machine has; the
host always.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

MAX_PROBLEMS = 20  # per source: a tool failing every second would otherwise fill the file
MAX_JSON_BUFFER = 4 << 20  # a "document" longer than this is not one: drop it and say so
PROBE_TIMEOUT_S = 1.0  # an exporter on the machine's own loopback answers at once or not
POWERCAP = "/sys/class/powercap"
_ZONE = re.compile(r"intel-rapl:(\d+)")
TOOL_DIRS = ("/opt/rocm/bin", "/usr/bin")  # a vendor tool's usual place when not on PATH


def find_tool(name: str, dirs=TOOL_DIRS, which=shutil.which) -> str | None:
    """A vendor tool on PATH, else in one of ``dirs``."""
    found = which(name)
    if found:
        return found
    for folder in dirs:
        candidate = Path(folder) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


@dataclass(frozen=True)
class RaplZone:
    package: int
    path: Path
    max_range_uj: int


def rapl_packages(root: Path | str = POWERCAP) -> tuple[list[RaplZone], list[str]]:
    """The package zones under ``root`` whose counter can be read, and why others cannot."""
    root = Path(root)
    zones, problems = [], []
    if not root.is_dir():
        return zones, [f"no {root} (no RAPL powercap interface on this host)"]
    for folder in sorted(root.iterdir()):
        if not _ZONE.fullmatch(folder.name):
            continue
        try:
            name = (folder / "name").read_text().strip()
        except OSError as exc:
            problems.append(f"{folder / 'name'}: {exc.strerror or exc}")
            continue
        match = re.fullmatch(r"package-(\d+)", name)
        if not match:
            continue
        try:
            int((folder / "energy_uj").read_text())
            max_range = int((folder / "max_energy_range_uj").read_text())
        except PermissionError:
            problems.append(
                f"{folder / 'energy_uj'} is readable by root only (Linux 5.10+): no CPU energy"
            )
            continue
        except (OSError, ValueError) as exc:
            problems.append(f"{folder}: {exc}")
            continue
        zones.append(RaplZone(package=int(match.group(1)), path=folder, max_range_uj=max_range))
    if not zones and not problems:
        problems.append(f"no package-N zone under {root}")
    return zones, problems


def json_documents(buffer: str) -> tuple[list[str], str, list[str]]:
    """The whole JSON documents at the start of ``buffer`` (a stream of them, as amd-smi's
    watch mode prints one per interval) as their text, what is left of it, and text that
    was skipped (lines before a document, such as watch mode's "'CTRL' + 'C' to stop"
    banner)."""
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
            _, end = decoder.raw_decode(buffer)
        except json.JSONDecodeError:
            if len(buffer) > MAX_JSON_BUFFER:
                skipped.append(f"{len(buffer)} characters that are not a JSON document")
                return docs, "", skipped
            return docs, buffer, skipped  # incomplete: wait for the rest
        docs.append(buffer[:end])
        buffer = buffer[end:]


def process_cpu_s(pid: int) -> float | None:
    """utime + stime of a running process (proc(5): fields 14 and 15, in clock ticks)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # the command name may hold spaces
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Track:
    """What one source (one of amd-smi's categories, the host…) recorded and cost."""

    key: str
    records: int = 0
    last_t: float | None = None  # the newest record's time
    problems: int = 0
    cpu_s: float = 0.0  # its thread's
    tool_cpu_s: float | None = None  # its tool's process (looping), or children (polled)

    def cost(self) -> dict:
        return {
            "source": self.key,
            "records": self.records,
            "cpu_s": self.cpu_s,
            "tool_cpu_s": self.tool_cpu_s,
        }


class Recorder:
    """The sources of ``plan``, each in a thread of its own, into one JSONL file."""

    def __init__(self, plan: dict) -> None:
        self.plan = plan
        self.interval_s = float(plan.get("interval_s", 1.0))
        if self.interval_s <= 0:
            raise ValueError(f"recording interval {self.interval_s} is not positive")
        self.path = Path(plan["out"])
        self.host = plan.get("host") or os.uname().nodename
        self.stopping = threading.Event()
        self._written = threading.Condition()
        self._fh = None
        self._started = 0.0
        self._threads: list[threading.Thread] = []
        self._procs: dict[str, subprocess.Popen] = {}
        self._tracks: dict[str, Track] = {}
        self.end: dict | None = None

    # ------------------------------------------------------------------ output

    def _track(self, key: str) -> Track:
        return self._tracks.setdefault(key, Track(key))

    def write(self, item: dict, key: str | None = None) -> None:
        """A line of the file; ``key``: the source whose record it is (counted, and its
        time is what :meth:`wait_until` waits for)."""
        with self._written:
            if self._fh is not None:
                self._fh.write(json.dumps(item, separators=(",", ":")) + "\n")
                self._fh.flush()
            if key is not None:
                track = self._track(key)
                track.records += 1
                track.last_t = max(track.last_t or 0.0, item["t"])
            self._written.notify_all()

    def problem(self, source: str, message: str) -> None:
        with self._written:
            track = self._track(source)
            track.problems += 1
            count = track.problems
        if count <= MAX_PROBLEMS:
            suffix = (
                " (further problems of this source not recorded)" if count == MAX_PROBLEMS else ""
            )
            self.write(
                {"kind": "problem", "source": source, "t": time.time(), "message": message + suffix}
            )

    def wait_until(self, t: float, timeout_s: float) -> bool:
        """Wait (up to ``timeout_s``) until every source has a record at or after Unix time
        ``t``; whether they all did. A source that never recorded and has had a problem (a
        tool that failed to start) is not waited for."""

        def done() -> bool:
            return all(
                (k.last_t is not None and k.last_t >= t) or (k.last_t is None and k.problems)
                for k in self._tracks.values()
            )

        with self._written:
            return self._written.wait_for(done, timeout_s)

    # ------------------------------------------------------------------ sources

    def _probe(self, url: str) -> bool:
        try:
            with urllib.request.urlopen(url, timeout=PROBE_TIMEOUT_S) as answer:  # noqa: S310
                return answer.status == 200
        except (OSError, ValueError):
            return False

    def choose(self) -> tuple[list[dict], list[str]]:
        """The first source of each chain that the machine has, and why the others were not."""
        chosen, not_used = [], []
        for chain in self.plan.get("chains", []):
            tried = []
            for source in chain:
                if "tool" in source:
                    path = find_tool(source["tool"], self.plan.get("tool_dirs", TOOL_DIRS))
                    if path:
                        chosen.append({**source, "path": path})
                        break
                    tried.append(f"no {source['tool']}")
                elif self._probe(source["url"]):
                    chosen.append(source)
                    break
                else:
                    tried.append(f"no {source['name']} at {source['url']}")
            else:
                if chain:
                    not_used.append(f"{chain[0].get('vendor', '?')}: " + ", ".join(tried))
        return chosen, not_used

    def _raw(self, source: dict, detail: str, t: float, text: str, **more) -> None:
        key = f"{source['name']} {detail}".strip()
        item = {"kind": "raw", "source": source["name"], "detail": detail, "t": t, "text": text}
        self.write({**item, **more}, key)

    def _loop(self, source: dict, argv: list[str], detail: str) -> None:
        """A tool that loops by itself: each line it prints (each JSON document, framed
        ``json``), stamped as it is read."""
        name = source["name"]
        key = f"{name} {detail}".strip()
        try:
            proc = subprocess.Popen(
                argv,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                stdin=subprocess.DEVNULL,
                text=True,
                env={**os.environ, **source.get("env", {})},
            )
        except OSError as exc:
            self.problem(key, f"cannot start {argv[0]}: {exc}")
            return
        self._procs[key] = proc
        assert proc.stdout is not None
        buffer = ""
        for line in proc.stdout:
            now = time.time()
            if source.get("framing") != "json":
                if line.strip():
                    self._raw(source, detail, now, line)
                continue
            docs, buffer, skipped = json_documents(buffer + line)
            for text in skipped:
                self._raw(source, detail, now, text, skipped=True)
            for text in docs:  # stamped when the line that completed it was read
                self._raw(source, detail, now, text)
        code = proc.wait()
        if not self.stopping.is_set():
            self.problem(key, f"{argv[0]} exited with {code}")

    def _every_interval(self, key: str, read) -> None:
        due = time.monotonic()
        while not self.stopping.is_set():
            try:
                read(time.time())
            except (OSError, ValueError, subprocess.SubprocessError) as exc:
                self.problem(key, f"{type(exc).__name__}: {exc}")
            due += self.interval_s
            delay = due - time.monotonic()
            if delay < 0:  # a slow read: skip the missed ticks rather than bunch them
                due, delay = time.monotonic(), 0.0
            self.stopping.wait(delay)

    def _poll(self, source: dict, argv: list[str]) -> None:
        track = self._track(source["name"])
        track.tool_cpu_s = 0.0

        def read(now: float) -> None:
            # os.times counts every child the process reaped meanwhile: an upper bound
            before = os.times()
            done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
            after = os.times()
            track.tool_cpu_s += after.children_user - before.children_user
            track.tool_cpu_s += after.children_system - before.children_system
            if done.returncode != 0:
                raise OSError(f"exit {done.returncode}: {done.stderr.strip()[:200]}")
            self._raw(source, "", now, done.stdout)

        self._every_interval(source["name"], read)

    def _scrape(self, source: dict) -> None:
        def read(now: float) -> None:
            with urllib.request.urlopen(source["url"], timeout=5) as answer:  # noqa: S310
                text = answer.read().decode("utf-8", "replace")
            self._raw(source, "", now, text)

        self._every_interval(source["name"], read)

    def _host(self, zones: list[RaplZone]) -> None:
        first = True

        def read(now: float) -> None:
            nonlocal first
            stat = Path("/proc/stat").read_text().splitlines()[0]
            meminfo = "\n".join(
                line
                for line in Path("/proc/meminfo").read_text().splitlines()
                if line.startswith(("MemTotal:", "MemAvailable:"))
            )
            item = {"kind": "host", "t": now, "stat": stat, "meminfo": meminfo}
            rapl = {}
            for zone in zones:
                try:
                    rapl[str(zone.package)] = int((zone.path / "energy_uj").read_text())
                except (OSError, ValueError):
                    continue
            if rapl:
                item["rapl"] = rapl
            if first and zones:
                item["rapl_max_uj"] = {str(z.package): z.max_range_uj for z in zones}
            first = False
            self.write(item, "host")

        self._every_interval("host", read)

    # ------------------------------------------------------------------ run

    def _thread(self, key: str, target, *args) -> None:
        track = self._track(key)

        def run() -> None:
            try:
                target(*args)
            finally:
                track.cpu_s += time.thread_time()

        thread = threading.Thread(target=run, name=f"telemetry-{key}", daemon=True)
        thread.start()
        self._threads.append(thread)

    def start(self) -> Recorder:
        """Write the meta line and start every source's thread."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = self.path.open("a", encoding="utf-8")
        self._started = time.time()
        chosen, not_used = self.choose()
        zones, rapl_problems = rapl_packages(self.plan.get("powercap", POWERCAP))
        rapl = (
            f"RAPL package energy ({len(zones)} package{'s' if len(zones) != 1 else ''})"
            if zones
            else "no RAPL package energy (" + "; ".join(rapl_problems) + ")"
        )
        described = [{"name": "host", "detail": f"/proc/stat, /proc/meminfo; {rapl}"}]
        not_used += rapl_problems
        for source in chosen:
            for argv in source.get("argvs", []):
                described.append(
                    {
                        "name": source["name"],
                        "command": [source["path"], *argv["args"]],
                        "detail": argv.get("detail", ""),
                    }
                )
            if "url" in source:
                described.append({"name": source["name"], "url": source["url"]})
        self.write(
            {
                "kind": "meta",
                "host": self.host,
                "cpus": os.cpu_count(),
                "interval_s": self.interval_s,
                "started_s": self._started,
                "sources": described,
                "not_used": not_used,
            }
        )
        self._thread("host", self._host, zones)
        for source in chosen:
            for argv in source.get("argvs", []):
                full = [source["path"], *argv["args"]]
                detail = argv.get("detail", "")
                if source["mode"] == "loop":
                    key = f"{source['name']} {detail}".strip()
                    self._thread(key, self._loop, source, full, detail)
                else:
                    self._thread(source["name"], self._poll, source, full)
            if source["mode"] == "scrape":
                self._thread(source["name"], self._scrape, source)
        return self

    def stop(self) -> dict:
        """Stop every source (the looping tools' processes too) and write the end line."""
        if self.end is not None:
            return self.end
        self.stopping.set()
        for key, proc in self._procs.items():
            self._track(key).tool_cpu_s = process_cpu_s(proc.pid)
            if proc.poll() is None:
                proc.terminate()
        for proc in self._procs.values():
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
        for thread in self._threads:
            thread.join(timeout=10)
        stopped = time.time()
        self.end = {
            "kind": "end",
            "stopped_s": stopped,
            "wall_s": stopped - self._started,
            "cost": [track.cost() for track in self._tracks.values()],
        }
        self.write(self.end)
        with self._written:
            if self._fh is not None:
                self._fh.close()
                self._fh = None
        return self.end

    def run(self) -> int:
        """Record until :attr:`stopping` is set (SIGTERM, SIGINT)."""
        self.start()
        self.stopping.wait()
        self.stop()
        return 0


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: recorder.py PLAN.json", file=sys.stderr)
        return 2
    try:
        plan = json.loads(Path(argv[0]).read_text())
    except (OSError, ValueError) as exc:
        print(f"recorder: cannot read the plan {argv[0]}: {exc}", file=sys.stderr)
        return 2
    recorder = Recorder(plan)
    signal.signal(signal.SIGTERM, lambda *_: recorder.stopping.set())
    signal.signal(signal.SIGINT, lambda *_: recorder.stopping.set())
    return recorder.run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
