"""A serving sweep (the orchestration): points (concurrencies, rates or trace speeds) x repeats -> summary.json.

Callable from Python (the runner and ``make demo`` call :func:`run_sweep` with a workload
from the POC spec) and from ``pocforge bench serve``. Per point it writes
``requests-<point>.jsonl`` as requests finish and rewrites ``summary.json`` atomically after
every repeat, so an interrupted or killed sweep keeps every finished point and request.
SIGINT/SIGTERM stop the sweep cleanly: in-flight requests are abandoned, the summary says
``interrupted``. A caller's :class:`PointHook` runs around each point (the runner samples
telemetry there and adds the energy figures to the point's repeats).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import signal
from collections.abc import Callable
from pathlib import Path

import aiohttp

from pocforge.bench.aggregate import best_passing, judge_point
from pocforge.bench.client import (
    ENDPOINTS,
    make_session,
    open_transport,
    resolve_transport,
)
from pocforge.bench.config import SweepConfig
from pocforge.bench.environment import DEFINITION_NOTES, check_server, definitions, environment
from pocforge.bench.measured import Measured
from pocforge.bench.records import RecordWriter
from pocforge.bench.repeat import Progress, now, run_repeat
from pocforge.bench.summary import (
    Environment,
    PointSummary,
    Summary,
    write_summary,
)
from pocforge.bench.tokenizer import Tokenizer


class PointHook:
    """What a sweep's caller does around each point: :meth:`before` its first repeat,
    :meth:`after` its last, before the point is aggregated and judged. Both run in a worker
    thread, never on the event loop, and neither while a repeat is measured (what they
    start, such as a recorder's threads, runs beside the repeats). :meth:`after` may add
    scalar metrics to each repeat's ``metrics`` (named in :mod:`pocforge.metrics`): they
    are aggregated like the sweep's own, and defined in the summary."""

    def before(self, point: PointSummary) -> None: ...

    def after(self, point: PointSummary) -> None: ...

    # A profiled point (:mod:`pocforge.runner.profile`): once its repeats are measured, it
    # runs once more between :meth:`before_profile` and :meth:`after_profile` (the
    # profiler's start and stop), that pass left out of its statistics.
    def profiles(self, point: PointSummary) -> bool:
        return False

    def before_profile(self, point: PointSummary) -> None: ...

    def after_profile(self, point: PointSummary, interrupted: bool) -> None: ...


class Hooks(PointHook):
    """Several hooks around each point: ``before`` in order, ``after`` in reverse (the last
    started is the first stopped, as a profiler inside a telemetry window)."""

    def __init__(self, *hooks: PointHook):
        self.hooks = hooks

    def before(self, point: PointSummary) -> None:
        for hook in self.hooks:
            hook.before(point)

    def after(self, point: PointSummary) -> None:
        for hook in reversed(self.hooks):
            hook.after(point)

    def profiles(self, point: PointSummary) -> bool:
        return any(hook.profiles(point) for hook in self.hooks)

    def before_profile(self, point: PointSummary) -> None:
        for hook in self.hooks:
            hook.before_profile(point)

    def after_profile(self, point: PointSummary, interrupted: bool) -> None:
        for hook in reversed(self.hooks):
            hook.after_profile(point, interrupted)


async def _sweep(
    cfg: SweepConfig,
    out_dir: Path,
    progress: Progress,
    stop: asyncio.Event,
    hook: PointHook | None = None,
) -> Summary:
    tok = Tokenizer(cfg.tokenizer) if cfg.tokenizer else None
    url = cfg.base_url.rstrip("/") + ENDPOINTS[cfg.api]
    limit = int(max(cfg.values)) if cfg.mode == "concurrency" else (cfg.max_concurrency or 0)
    kind = resolve_transport(cfg.transport, cfg.base_url)
    async with make_session(limit=limit, timeout_s=cfg.timeout_s) as session:
        served = await check_server(session, cfg.base_url, cfg.model)
        transport = open_transport(kind, session, cfg.timeout_s)
        try:
            return await _points(
                cfg,
                out_dir,
                progress,
                stop,
                session,
                transport,
                url,
                tok,
                environment(served, kind),
                hook or PointHook(),
            )
        finally:
            await transport.aclose()


def _pass(cfg: SweepConfig) -> str:
    n = cfg.profile_requests
    return "repeat" if n is None else f"pass of {n} request{'s' if n > 1 else ''}"


async def _points(
    cfg: SweepConfig,
    out_dir: Path,
    progress: Progress,
    stop: asyncio.Event,
    session: aiohttp.ClientSession,
    transport,
    url: str,
    tok: Tokenizer | None,
    env: Environment,
    hook: PointHook,
) -> Summary:
    summary = Summary(
        status="running",
        started_at=now(),
        config=cfg.model_dump(mode="json"),
        definitions=definitions(),
        definition_notes=DEFINITION_NOTES,
        environment=env,
    )
    write_summary(summary, out_dir)
    repeat = functools.partial(run_repeat, cfg, session, transport, url, tok)
    profiled_pass = functools.partial(run_repeat, cfg.profiled_pass(), session, transport, url, tok)
    for p_idx, value in enumerate(cfg.values):
        if stop.is_set():
            break
        pid = cfg.point_id(value)
        point = PointSummary(
            id=pid,
            mode=cfg.mode,
            value=value,
            status="ok",
            records_file=f"requests-{pid}.jsonl",
            repeats=[],
        )
        summary.points.append(point)
        await asyncio.to_thread(hook.before, point)
        per_repeat: list[list[Measured]] = []
        with RecordWriter(out_dir / point.records_file) as writer:
            for rep in range(cfg.repeats):
                if stop.is_set():
                    break
                result, recs = await repeat(pid, p_idx, value, rep, writer, progress, stop)
                per_repeat.append(recs)
                point.repeats.append(result)
                write_summary(summary, out_dir)
        statuses = {r.status for r in point.repeats}
        if "interrupted" in statuses or (stop.is_set() and len(point.repeats) < cfg.repeats):
            point.status = "interrupted"
        elif statuses == {"failed"} or not point.repeats:
            point.status = "failed"
            point.error = next((r.error for r in point.repeats if r.error), "no repeat ran")
        elif "failed" in statuses:
            point.error = "; ".join(
                f"repeat {r.repeat}: {r.error}" for r in point.repeats if r.error
            )
        if point.status == "ok" and not stop.is_set() and hook.profiles(point):
            # its own pass: a profiler slows what it records (vLLM's worker stalls its
            # engine while it writes the trace), so no measured request runs under it
            await asyncio.to_thread(hook.before_profile, point)
            profiled = f"requests-{pid}.profiled.jsonl"
            with RecordWriter(out_dir / profiled) as writer:
                result, _ = await profiled_pass(
                    pid, p_idx, value, cfg.repeats, writer, progress, stop
                )
            interrupted = result.status == "interrupted" or stop.is_set()
            await asyncio.to_thread(hook.after_profile, point, interrupted)
            point.notes.append(
                f"profiled in one more {_pass(cfg)} after these ({profiled}), left out of the "
                "statistics: a profiler slows what it records"
            )
        await asyncio.to_thread(hook.after, point)
        judge_point(summary, point, cfg, per_repeat)
        write_summary(summary, out_dir)

    summary.finished_at = now()
    if stop.is_set():
        summary.status = "interrupted"
    elif summary.points and all(p.status == "failed" for p in summary.points):
        summary.status = "failed"
    else:
        summary.status = "complete"
    summary.best_passing_point = best_passing(summary)
    write_summary(summary, out_dir)
    return summary


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


# How often a stop_when check runs during a sweep.
WATCH_INTERVAL_S = 2.0


async def _watch(check: Callable[[], str | None], stop: asyncio.Event) -> str | None:
    """Run ``check`` until it gives a reason (then stop the sweep and return it)."""
    while not stop.is_set():
        reason = await asyncio.to_thread(check)  # blocking probes stay off the loop
        if reason:
            stop.set()
            return reason
        await asyncio.sleep(WATCH_INTERVAL_S)
    return None


def _finish_watch(watch: asyncio.Task | None) -> str | None:
    """The watchdog's reason when it stopped the sweep; else cancel it."""
    if watch is None:
        return None
    if watch.done() and not watch.cancelled():
        return watch.result()
    watch.cancel()
    return None


def run_sweep(
    config: SweepConfig,
    out_dir: str | Path,
    progress: Progress | None = None,
    stop_when: Callable[[], str | None] | None = None,
    hook: PointHook | None = None,
) -> Summary:
    """Run every point and repeat of ``config``; write and return the summary.

    Raises :class:`BenchError` when the sweep cannot start (server unreachable, model not
    served). A server dying mid-point fails that point only. SIGINT/SIGTERM (main thread)
    end the sweep with status ``interrupted``. ``stop_when``: called every few seconds in a
    worker thread; a text it returns (why) stops the sweep the same way, with that reason
    in the summary's ``stopped_because`` (a cluster run's node watchdog). ``hook``: what
    the caller does around each point (:class:`PointHook`).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    progress = progress or Progress()

    async def main() -> Summary:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        installed = []
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, stop.set)
                installed.append(sig)
        watch = asyncio.create_task(_watch(stop_when, stop)) if stop_when else None
        try:
            summary = await _sweep(config, out, progress, stop, hook)
        finally:
            reason = _finish_watch(watch)
            for sig in installed:
                loop.remove_signal_handler(sig)
        if reason:
            summary.stopped_because = reason
            write_summary(summary, out)
        return summary

    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        return runner.run(main())
