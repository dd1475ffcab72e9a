"""The profilers a profiled serving point or training range runs under, one object per tool,
and the files they leave. Standard library only: the workload role copies this file to the
nodes beside ``node_launcher.py``, which imports it, and the profile role runs
``python3 profilers.py settle ...`` there.

Each :class:`Profiler` says how a launch runs under it (:meth:`~Profiler.argv`), how a
point asks the server to start it (:meth:`~Profiler.start_body`), when its files are whole
(:meth:`~Profiler.pending`), what is made of them afterwards (:meth:`~Profiler.summarize`),
and whether they come only when the server exits (:attr:`~Profiler.at_exit`):

- ``torch``: the framework's own profiler. After ``/stop_profile`` returns, vLLM's workers
  each write their trace, then sum it into their table (``key_averages``), which under load
  comes seconds after the trace's size holds still; SGLang writes traces only.
- ``nsys``: Nsight Systems around the server, gated by the framework's CUDA-profiler
  switch; a range's report comes after the range ends (its raw stream first), and
  ``nsys stats`` sums it into the kernel table the dashboard reads.
- ``rocprofv3``: writes every file when the profiled processes exit.

A point's files are waited for until they hold still and none is pending, or until the
servers' logs say the profiler failed to stop (it will write no more), or until one
deadline (:data:`SETTLE_S`); a node whose launches hold no engine is not waited for."""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

SETTLE_S = 120.0  # the one deadline for a profiled point's files
TABLE_SUFFIX = ".profiler_out.txt"  # vLLM's per-worker table of top operations
TRACE_SUFFIXES = (".trace.json.gz", ".trace.json")
# what vLLM's worker logs when its profiler raised on stop (torch's ``key_averages`` raises
# a UnicodeDecodeError there, pytorch/kineto#988): it then writes no table
STOP_FAILED = "Failed to stop profiler"
# on a node, beside the profiler's folder: how far each launch log was read for those lines
LOGS_SEEN = ".profile-logs-seen.json"
NSYS_REPORT_SUFFIX = ".nsys-rep"
# what nsys writes while a range's report is still being made (its raw stream, turned into
# the report once the range ends), and the kernel table the kit sums each report into
NSYS_PENDING_SUFFIXES = (".qdstrm",)
NSYS_KERNEL_REPORT = "cuda_gpu_kern_sum"
NSYS_PREFIX = "nsys"  # report names: nsys-<host>-<pid>[.<range>].nsys-rep
NSYS_STATS_S = 600.0  # nsys stats of one report
ROCPROF_SUBDIR = "rocprofv3"  # under the profile folder: what rocprofv3 writes at exit
# the GPU profilers' kernel summaries, as the tools name them: rocprofv3 --stats, nsys stats
# (CSV or its column text), legacy rocprof --stats (pocforge.report.kernel_stats reads them)
KERNEL_SUMMARY_PATTERNS = (
    "*kernel_stats.csv",
    f"*{NSYS_KERNEL_REPORT}*.csv",
    f"*{NSYS_KERNEL_REPORT}*.txt",
    "*results.stats.csv",
)


class Profiler:
    """The framework's own torch profiler: no wrapper around the launch; vLLM's workers
    write a trace, then a table, each; SGLang's a trace."""

    name = "torch"
    writes = "table"  # what comes last after a stop, in messages
    at_exit = False  # its files come after the stop call, not at the servers' exit
    gated = False  # needs the roctx gate (pocforge.frameworks.gpu_profiler) to record a range

    def describe(self, framework: str) -> str:
        return f"{framework}'s torch profiler"

    def argv(self, out_dir: str, counters: list[str] = ()) -> list[str]:
        """The profiler's command line up to the program it runs ([]: none)."""
        return []

    def start_body(self, framework: str, output_dir: str) -> dict | None:
        """The body of the server's ``/start_profile``: SGLang's names its output folder."""
        return {"output_dir": output_dir} if framework == "sglang" else None

    def pending(self, files: list[Path], framework: str) -> list[str]:
        """What the files still lack: the vLLM workers (a trace's name up to its first dot:
        ``rank0``, ``dp1_pp0_tp0``) whose trace is written and whose table is not yet."""
        if framework != "vllm":
            return []
        names = {p.name for p in files}
        workers = {n.split(".", 1)[0] for n in names if n.endswith(TRACE_SUFFIXES)}
        return sorted(w for w in workers if w + TABLE_SUFFIX not in names)

    def summarize(self, files: list[Path], binary: str = "") -> list[str]:
        """What is made of the whole files by the tool's ``binary`` (a line per one that
        could not be)."""
        return []


class Nsys(Profiler):
    """Nsight Systems: a report per range the framework's CUDA-profiler switch opens and
    closes (``--capture-range-end=repeat``), summed into its kernel table."""

    name = "nsys"
    writes = "report"

    def describe(self, framework: str) -> str:
        return self.name

    def argv(self, out_dir: str, counters: list[str] = ()) -> list[str]:
        return [
            "nsys", "profile",
            "--trace", "cuda,nvtx,osrt",
            "--trace-fork-before-exec", "true",  # the workers a server or launcher starts
            "--cuda-graph-trace", "node",  # kernels inside CUDA graphs, one by one
            "--capture-range", "cudaProfilerApi",
            "--capture-range-end", "repeat",  # a report per start/stop: per point or range
            "--force-overwrite", "true",
            "--output", f"{out_dir}/{NSYS_PREFIX}-%h-%p",
        ]  # fmt: skip

    def start_body(self, framework: str, output_dir: str) -> dict | None:
        """SGLang's start request switches the CUDA profiler (``cudaProfilerStart``), not
        torch's; vLLM's server was started with its profiler set to cuda."""
        if framework != "sglang":
            return None
        return {"output_dir": output_dir, "activities": ["CUDA_PROFILER"]}

    def pending(self, files: list[Path], framework: str) -> list[str]:
        names = [p.name for p in files]
        if any(n.endswith(NSYS_PENDING_SUFFIXES) for n in names):
            return [n for n in names if n.endswith(NSYS_PENDING_SUFFIXES)]
        return [] if any(n.endswith(NSYS_REPORT_SUFFIX) for n in names) else ["an nsys report"]

    def summarize(self, files: list[Path], binary: str = "") -> list[str]:
        """Each report among ``files`` summed into its kernel table beside it
        (``<report>_cuda_gpu_kern_sum.csv``) by ``binary`` (the nsys to run; default: on
        the PATH)."""
        problems = []
        for report in (p for p in files if p.name.endswith(NSYS_REPORT_SUFFIX)):
            stem = report.with_name(report.name[: -len(NSYS_REPORT_SUFFIX)])
            argv = [binary or "nsys", "stats", "--report", NSYS_KERNEL_REPORT, "--format", "csv"]
            argv += ["--force-export", "true", "--output", str(stem), str(report)]
            try:
                done = subprocess.run(argv, capture_output=True, text=True, timeout=NSYS_STATS_S)
            except (OSError, subprocess.TimeoutExpired) as exc:
                problems.append(f"{report.name}: nsys stats: {exc}")
                continue
            if done.returncode != 0:
                tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
                problems.append(f"{report.name}: nsys stats exited {done.returncode}: {tail[0]}")
        return problems


class Rocprofv3(Profiler):
    """rocprofv3: paused until the gate resumes it (``--selected-regions``), its files
    (``--stats``: ``*_kernel_stats.csv``) written when the profiled processes exit."""

    name = "rocprofv3"
    writes = "files"
    at_exit = True
    gated = True  # HIP's hipProfilerStart is a stub: torch's switch gates nothing on ROCm

    def describe(self, framework: str) -> str:
        return self.name

    def argv(self, out_dir: str, counters: list[str] = ()) -> list[str]:
        argv = [
            "rocprofv3",
            "--selected-regions",  # paused until roctxProfilerResume (the gate)
            "--marker-trace",
            "--kernel-trace",
            "--stats",
            "--output-format", "csv",
            "--output-directory", f"{out_dir}/{ROCPROF_SUBDIR}",
            "--output-file", "%hostname%-%pid%",
        ]  # fmt: skip
        if counters:
            argv += ["--pmc", *counters]
        return [*argv, "--"]

    start_body = Nsys.start_body

    def pending(self, files: list[Path], framework: str) -> list[str]:
        return []  # nothing to wait for after a stop: it writes at the servers' exit


PROFILERS: dict[str, Profiler] = {p.name: p for p in (Profiler(), Nsys(), Rocprofv3())}


def profiler(tool: str) -> Profiler:
    """The profiler named ``tool`` (``torch``, ``nsys``, ``rocprofv3``)."""
    try:
        return PROFILERS[tool]
    except KeyError:
        raise ValueError(f"no profiler {tool!r} ({', '.join(PROFILERS)})") from None


def is_kernel_summary(path: Path) -> bool:
    """Whether ``path`` is named as a GPU profiler names its kernel summary."""
    return any(fnmatch.fnmatch(path.name, pattern) for pattern in KERNEL_SUMMARY_PATTERNS)


# ---------------------------------------------------------------- a point's files, once whole


def stop_failures(logs: dict[Path, int]) -> tuple[list[str], dict[Path, int]]:
    """The lines of each log, from its offset on, saying a profiler failed to stop; and
    each log's offset after them (a log shorter than its offset, started again, is read
    from its start)."""
    lines: list[str] = []
    read_to: dict[Path, int] = {}
    for log, start in logs.items():
        try:
            with Path(log).open("rb") as handle:
                if start > os.fstat(handle.fileno()).st_size:
                    start = 0
                handle.seek(start)
                data = handle.read()
        except OSError:
            read_to[log] = start
            continue
        read_to[log] = start + len(data)
        text = data.decode(errors="replace")
        lines += [line.strip() for line in text.splitlines() if STOP_FAILED in line]
    return lines, read_to


def settle(
    src: Path,
    framework: str,
    tool: Profiler,
    before: frozenset[Path] = frozenset(),
    failed: Callable[[], bool] = lambda: False,
    deadline_s: float = SETTLE_S,
) -> list[Path]:
    """The files ``tool`` wrote under ``src`` (those not in ``before``) once their sizes
    hold still for a second and none is pending, or once ``failed()`` says the profiler
    will write no more; what there is at the deadline."""
    deadline = time.monotonic() + deadline_s
    last: dict[Path, int] = {}
    while True:
        new = {p: p.stat().st_size for p in Path(src).rglob("*") if p.is_file() and p not in before}
        whole = bool(new) and not tool.pending(list(new), framework)
        if new == last and (whole or failed()) or time.monotonic() > deadline:
            return sorted(new)
        last = new
        time.sleep(1.0)


def move(files: list[Path], dest: Path) -> list[Path]:
    """Move ``files`` into ``dest`` (made if missing), by name; where they are now."""
    dest.mkdir(parents=True, exist_ok=True)
    moved = [dest / path.name for path in files]
    for path, there in zip(files, moved, strict=True):
        shutil.move(str(path), there)
    return moved


def node_logs(log_dir: Path, since: float, seen: Path) -> dict[Path, int]:
    """A node's launch logs written since ``since`` (a UNIX time: the profiled point's
    start), each with the offset an earlier point's settle read it to (kept in ``seen``;
    0 for a new one)."""
    offsets = _logs_seen(seen)
    logs = {}
    for log in sorted(Path(log_dir).glob("*.log")):
        with contextlib.suppress(OSError):
            if log.stat().st_mtime >= since:
                logs[log] = offsets.get(log.name, 0)
    return logs


def _logs_seen(seen: Path) -> dict[str, int]:
    """How far an earlier settle read each log (empty where it never ran or its file is torn)."""
    try:
        offsets = json.loads(Path(seen).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(offsets, dict):
        return {}
    return {name: size for name, size in offsets.items() if isinstance(size, int)}


def keep_logs_seen(seen: Path, read_to: dict[Path, int]) -> None:
    """Record in ``seen`` how far each log was read, so the next point's settle reads on
    from there."""
    offsets = _logs_seen(seen)
    offsets.update({log.name: size for log, size in read_to.items()})
    with contextlib.suppress(OSError):
        Path(seen).write_text(json.dumps(offsets, sort_keys=True))


def set_aside(dest: Path, src: Path, since: float) -> int:
    """An earlier attempt's files (a resumed run on nodes that kept their run folder):
    the point's folder it filled, and what its profilers wrote into ``src`` before this
    point began (mtime before ``since``), moved together into ``.<dest>.before-<time>``
    beside it (fetched with the run, not shown as this point's); how many files."""
    stale = []
    if since > 0 and src.is_dir():
        with contextlib.suppress(OSError):
            stale = [p for p in src.iterdir() if p.is_file() and p.stat().st_mtime < since]
    earlier = [p for p in dest.rglob("*") if p.is_file()] if dest.is_dir() else []
    if not earlier and not stale:
        return 0
    aside = dest.with_name(f".{dest.name}.before-{int(time.time())}")
    if dest.is_dir():
        dest.rename(aside)
    move(stale, aside)
    return len(earlier) + len(stale)


def writes_profiles(plan: Path) -> bool:
    """Whether a node's launches (its plan file: ``serve.launches.json``) hold an engine,
    whose profiler writes on the node; a node of none but a router, or of no launch, writes
    nothing (an unreadable plan: assume it does)."""
    try:
        launches = json.loads(Path(plan).read_text())["launches"]
    except (OSError, ValueError, KeyError, TypeError):
        return True
    return any(launch.get("role") != "router" for launch in launches)


def _settle_main(argv: list[str]) -> int:
    """``profilers.py settle SRC DEST --framework F --tool T``: on a node, a profiled
    point's files moved into their own folder before the next point's are written (an
    earlier attempt's set aside first, :func:`set_aside`); prints ``{"moved": N,
    "missing_tables": [...], "problems": [...], "failed": [line], "set_aside": N}``."""
    parser = argparse.ArgumentParser(prog="profilers.py settle")
    parser.add_argument("src", type=Path)
    parser.add_argument("dest", type=Path)
    parser.add_argument("--framework", required=True)
    parser.add_argument("--tool", default="torch", choices=sorted(PROFILERS))
    parser.add_argument("--deadline", type=float, default=SETTLE_S)
    parser.add_argument("--nsys", default="nsys", help="the nsys that sums the reports")
    parser.add_argument("--logs", type=Path, help="the launches' logs: a profiler's failure")
    parser.add_argument("--since", type=float, default=0.0, help="the point's start (UNIX s)")
    parser.add_argument("--plan", type=Path, help="the node's launches: does it write at all")
    args = parser.parse_args(argv)
    tool = PROFILERS[args.tool]
    args.src.mkdir(parents=True, exist_ok=True)
    earlier = set_aside(args.dest, args.src, args.since)
    # a worker that logged its profiler's failure writes no table: no waiting it out; how
    # far each log was read is kept beside the profiler's folder (not among the logs,
    # which the run keeps)
    seen = args.src.parent / LOGS_SEEN
    logs = node_logs(args.logs, args.since, seen) if args.logs else {}
    failed: list[str] = []

    def stopped_failing() -> bool:
        found, read_to = stop_failures(logs)
        failed.extend(found)
        logs.update(read_to)
        return bool(failed)

    files = []
    if args.plan is None or writes_profiles(args.plan):
        files = settle(
            args.src, args.framework, tool, failed=stopped_failing, deadline_s=args.deadline
        )
    stopped_failing()  # and what came in the last second
    if args.logs:
        keep_logs_seen(seen, logs)
    missing = tool.pending(files, args.framework)
    moved = move(files, args.dest)
    problems = tool.summarize(moved, args.nsys)
    report = {"moved": len(files), "missing_tables": missing, "problems": problems}
    print(json.dumps({**report, "failed": failed[:1], "set_aside": earlier}), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    """``settle`` a profiled point's files on a node (:func:`_settle_main`)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] != ["settle"]:
        print("usage: profilers.py settle SRC DEST --framework F [--tool T] ...", file=sys.stderr)
        return 2
    return _settle_main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
