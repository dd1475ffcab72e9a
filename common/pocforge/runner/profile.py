"""The profiled points of a workload (``serving.workloads[].profile``): once the point's
repeats are measured, it runs once more with the framework's profiler started before and
stopped after (the sweep's profiled pass, :class:`~pocforge.bench.sweep.PointHook`: left out
of the point's statistics, as a profiler slows what it records), and the pass's traces are
moved into the run as ``serving/<workload>/profile-<point>/``.

vLLM (started with ``--profiler-config``, :mod:`pocforge.frameworks.vllm`) takes
``POST /start_profile`` and ``/stop_profile`` and writes, per process, a gzipped Chrome
trace (``*.pt.trace.json.gz``, open it in Perfetto) and the profiler's own table of the
top operations by time (``*.profiler_out.txt``); SGLang (``SGLANG_TORCH_PROFILER_DIR``)
takes the same calls, with the output folder in the start request's body.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable
from pathlib import Path

from pocforge.bench.summary import PointSummary
from pocforge.bench.sweep import PointHook
from pocforge.frameworks import profilers

Say = Callable[[str], None]
# the one deadline for a profiled point's files (pocforge.frameworks.profilers)
SETTLE_S = profilers.SETTLE_S
# the server's answer to /stop_profile comes once its profilers stopped (vLLM: every
# engine's); after an interrupted pass (Ctrl-C, a node lost) it is waited for this long,
# not the full timeout: a lost engine never answers (a DP engine's node lost: h1's API
# waited out the 300 s in the rehearsal)
STOP_S = 300
INTERRUPTED_STOP_S = 30
# what vLLM's worker logs when its profiler raised on stop: it then writes no table, so the
# kit stops waiting
STOP_FAILED = profilers.STOP_FAILED


class ProfileError(RuntimeError):
    """The server refused to start or stop its profiler."""


class ProfileHook(PointHook):
    def __init__(
        self,
        base_url: str,
        framework: str,
        points: list[str],
        trace_dir: Path,
        folder: Path,
        say: Say = print,
        logs: list[Path] = (),
        tool: str = "torch",
    ):
        """``logs``: the server processes' log files, read for a profiler that failed to
        stop. ``tool``: ``torch``, or the GPU profiler the server runs under (nsys,
        rocprofv3: :mod:`pocforge.frameworks.profilers`)."""
        self.base_url, self.framework, self.points = base_url.rstrip("/"), framework, set(points)
        self.trace_dir, self.folder, self.say = Path(trace_dir), Path(folder), say
        self.logs = [Path(log) for log in logs]
        self.profiler = profilers.profiler(tool)
        self._before: set[Path] = set()
        self._log_sizes: dict[Path, int] = {}

    def _post(self, path: str, body: dict | None = None, timeout_s: float = STOP_S) -> None:
        data = json.dumps(body or {}).encode()
        request = urllib.request.Request(
            self.base_url + path, data, {"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as answer:
                answer.read()
        except OSError as exc:
            raise ProfileError(f"{self.base_url}{path}: {exc}") from None

    def _start(self, point: PointSummary) -> None:
        if point.id not in self.points:
            return
        self.trace_dir.mkdir(parents=True, exist_ok=True)
        self._before = set(self.trace_dir.rglob("*"))
        # from here: vLLM's profiler stops itself after its first engine steps
        # (max_iterations), mid-point, and a failure to write its table is logged then
        self._log_sizes = {log: _size(log) for log in self.logs}
        self._post("/start_profile", self.profiler.start_body(self.framework, str(self.trace_dir)))
        self.say(f"profile: {point.id} under {self.profiler.describe(self.framework)}")

    def profiles(self, point: PointSummary) -> bool:
        return point.id in self.points

    def before_profile(self, point: PointSummary) -> None:
        try:
            self._start(point)
        except ProfileError as exc:  # a profile is extra: the point is measured without it
            self.say(f"profile: {point.id}: not started: {exc}")
            self.points.discard(point.id)

    def _stop(self, point: PointSummary, interrupted: bool = False) -> bool:
        """Stop the profiler after a profiled pass; False for a point not profiled."""
        if point.id not in self.points:
            return False
        timeout_s = INTERRUPTED_STOP_S if interrupted else STOP_S
        try:
            self._post("/stop_profile", timeout_s=timeout_s)
        except ProfileError as exc:
            self.say(f"profile: {point.id}: the profiler did not stop cleanly: {exc}")
        return True

    def after_profile(self, point: PointSummary, interrupted: bool) -> None:
        if not self._stop(point, interrupted):
            return
        out = self.folder / f"profile-{point.id}"
        if self.profiler.at_exit:
            self.say(
                f"profile: {point.id}: {self.profiler.name} writes its files when the server "
                f"stops; they are kept in {out} then"
            )
            return
        written = profilers.settle(
            self.trace_dir,
            self.framework,
            self.profiler,
            before=frozenset(self._before),
            failed=lambda: bool(self._stop_failures()),
            deadline_s=SETTLE_S,
        )
        missing = self.profiler.pending(written, self.framework)
        failed = self._stop_failures()
        what = self.profiler.writes
        if failed:
            self.say(f"profile: {point.id}: no {what} from {missing}: {failed[0]}")
        elif missing:
            self.say(f"profile: {point.id}: no {what} after {SETTLE_S:.0f} s from {missing}")
        if (failed or missing) and what == "table":  # nothing lost: the traces are whole
            self.say(f"profile: {point.id}: the dashboard sums their tables from their traces")
        moved = profilers.move(written, out)
        for problem in self.profiler.summarize(moved):
            self.say(f"profile: {point.id}: no kernel table: {problem}")
        self.say(f"profile: {point.id}: {len(written)} files in {out}")

    def _stop_failures(self) -> list[str]:
        """The lines the servers logged since the point's profile started saying the
        profiler failed."""
        return profilers.stop_failures(self._log_sizes)[0]


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
