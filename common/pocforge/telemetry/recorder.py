"""A cluster node's telemetry, recorded raw while its workload runs; the controller parses it.

The workload role copies this file to every node beside the kit's process manager and runs
it, before the node's launches, on the plan the controller wrote
(:func:`pocforge.telemetry.node.recorder_plan`)::

    python3 recorder.py telemetry.plan.json     # record until SIGTERM (collect.yml sends it)

Like ``process.py`` it imports nothing but the standard library: a node needs no kit
installed, only the ``python3`` Ansible already uses and its vendor's tools on the host (a
framework in a container still leaves ``amd-smi`` and ``nvidia-smi`` on the host). It does
no parsing: each source's output is written as it was printed, one JSON line per line a
looping tool printed (``amd-smi metric --watch``, ``nvidia-smi -lms``) or per read of a
polled one (``rocm-smi``, an exporter's ``/metrics``, the host's ``/proc`` and RAPL
counters), stamped with the node's Unix time when it was read. The controller turns the file
into the kit's telemetry series with the parsers tested on real captures
(:func:`pocforge.telemetry.node.series_from_raw`), so there is one parser of each tool's
output, on the controller, and a node whose tool prints something new loses nothing.

Lines, each a JSON object with a ``kind``:

- ``meta`` (first): host, interval, the sources used (their commands or URLs) and why the
  others were not;
- ``raw``: ``source``, ``detail`` (amd-smi's category), ``t``, ``text``;
- ``host``: ``t``, ``stat`` (``/proc/stat``'s ``cpu`` line), ``meminfo`` (its MemTotal and
  MemAvailable lines), ``rapl`` (package -> ``energy_uj``) and, in the first,
  ``rapl_max_uj`` (package -> ``max_energy_range_uj``);
- ``problem``: a source's failure (a tool that exits, a read that fails), with its time;
- ``end`` (last, on SIGTERM): when recording stopped and the CPU it cost (the recorder's own
  threads and each looping tool's process).

Which sources: for each vendor's chain in the plan (AMD: amd-smi, the Device Metrics
Exporter, rocm-smi; NVIDIA: nvidia-smi, dcgm-exporter), the first the node has.
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
POWERCAP = Path("/sys/class/powercap")
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


def rapl_packages(root: Path = POWERCAP) -> tuple[list[RaplZone], list[str]]:
    """The package zones under ``root`` whose counter can be read, and why others cannot."""
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


class Recorder:
    """The node's sources, each in a thread of its own, into one JSONL file."""

    def __init__(self, plan: dict) -> None:
        self.plan = plan
        self.interval_s = float(plan.get("interval_s", 1.0))
        self.path = Path(plan["out"])
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._fh = None
        self._threads: list[threading.Thread] = []
        self._procs: dict[str, subprocess.Popen] = {}
        self._tool_cpu_s: dict[str, float] = {}
        self._problems: dict[str, int] = {}

    # ------------------------------------------------------------------ output

    def write(self, item: dict) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.write(json.dumps(item, separators=(",", ":")) + "\n")
                self._fh.flush()

    def problem(self, source: str, message: str) -> None:
        count = self._problems[source] = self._problems.get(source, 0) + 1
        if count <= MAX_PROBLEMS:
            suffix = (
                " (further problems of this source not recorded)" if count == MAX_PROBLEMS else ""
            )
            self.write(
                {"kind": "problem", "source": source, "t": time.time(), "message": message + suffix}
            )

    # ------------------------------------------------------------------ sources

    def _probe(self, url: str) -> bool:
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:  # noqa: S310 (the node's own)
                return answer.status == 200
        except (OSError, ValueError):
            return False

    def choose(self) -> tuple[list[dict], list[str]]:
        """The first source of each chain that the node has, and why the others were not."""
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

    def _loop(self, source: dict, argv: list[str], detail: str) -> None:
        """A tool that loops by itself: each line it prints, stamped as it is read."""
        name = source["name"]
        key = f"{name} {detail}".strip()
        env = {**os.environ, **source.get("env", {})}
        try:
            proc = subprocess.Popen(
                argv,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                stdin=subprocess.DEVNULL,
                text=True,
                env=env,
            )
        except OSError as exc:
            self.problem(name, f"cannot start {argv[0]}: {exc}")
            return
        self._procs[key] = proc
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.strip():
                self.write(
                    {
                        "kind": "raw",
                        "source": name,
                        "detail": detail,
                        "t": time.time(),
                        "text": line,
                    }
                )
        code = proc.wait()
        if not self.stop.is_set():
            self.problem(name, f"{argv[0]} exited with {code}")

    def _every_interval(self, name: str, read) -> None:
        due = time.monotonic()
        while not self.stop.is_set():
            try:
                read(time.time())
            except (OSError, ValueError, subprocess.SubprocessError) as exc:
                self.problem(name, f"{type(exc).__name__}: {exc}")
            due += self.interval_s
            delay = due - time.monotonic()
            if delay < 0:  # a slow read: skip the missed ticks rather than bunch them
                due, delay = time.monotonic(), 0.0
            self.stop.wait(delay)

    def _poll(self, source: dict, argv: list[str]) -> None:
        def read(now: float) -> None:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
            if done.returncode != 0:
                raise OSError(f"exit {done.returncode}: {done.stderr.strip()[:200]}")
            self.write({"kind": "raw", "source": source["name"], "t": now, "text": done.stdout})

        self._every_interval(source["name"], read)

    def _scrape(self, source: dict) -> None:
        def read(now: float) -> None:
            with urllib.request.urlopen(source["url"], timeout=5) as answer:  # noqa: S310
                text = answer.read().decode("utf-8", "replace")
            self.write({"kind": "raw", "source": source["name"], "t": now, "text": text})

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
            self.write(item)

        self._every_interval("host", read)

    # ------------------------------------------------------------------ run

    def _thread(self, target, *args) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        thread.start()
        self._threads.append(thread)

    def run(self) -> int:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = self.path.open("a", encoding="utf-8")
        started = time.time()
        chosen, not_used = self.choose()
        zones, rapl_problems = rapl_packages(POWERCAP)
        rapl = f"RAPL ({len(zones)} packages)" if zones else "no RAPL package energy"
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
                "host": os.uname().nodename,
                "cpus": os.cpu_count(),
                "interval_s": self.interval_s,
                "started_s": started,
                "sources": described,
                "not_used": not_used,
            }
        )
        self._thread(self._host, zones)
        for source in chosen:
            mode = source["mode"]
            for argv in source.get("argvs", []):
                full = [source["path"], *argv["args"]]
                if mode == "loop":
                    self._thread(self._loop, source, full, argv.get("detail", ""))
                else:
                    self._thread(self._poll, source, full)
            if mode == "scrape":
                self._thread(self._scrape, source)
        self.stop.wait()
        for key, proc in self._procs.items():
            self._tool_cpu_s[key] = process_cpu_s(proc.pid) or 0.0
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
        times = os.times()
        self.write(
            {
                "kind": "end",
                "stopped_s": stopped,
                "wall_s": stopped - started,
                "cpu_s": times.user + times.system,
                "tool_cpu_s": self._tool_cpu_s,
            }
        )
        with self._lock:
            self._fh.close()
            self._fh = None
        return 0


def process_cpu_s(pid: int) -> float | None:
    """utime + stime of a running process (proc(5): fields 14 and 15, in clock ticks)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # the command name may hold spaces
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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
    signal.signal(signal.SIGTERM, lambda *_: recorder.stop.set())
    signal.signal(signal.SIGINT, lambda *_: recorder.stop.set())
    return recorder.run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
