"""Load generation for one run: closed loop, open loop or trace replay.

- closed loop (``concurrency``): N workers, each sends its next request as soon as its
  previous one finished; a request's scheduled time is when its worker became free.
- open loop (``rate``): requests scheduled at arrival times drawn from a gamma process
  with mean rate ``rate`` and shape ``burstiness`` (1 = Poisson; < 1 burstier, > 1 more
  regular), optionally capped at ``max_concurrency`` in flight (vLLM's semantics).
- trace: the dataset's own send offsets, divided by ``value`` (2 = twice as fast).

Bounded by a request count or a duration (no new sends after it; in-flight requests
finish). Warm-up requests run before the clock starts and are never recorded.

The client watches itself while it runs: an event-loop lag probe (a timer every 25 ms,
lateness recorded), each request's send delay (actual - scheduled send time) and the process CPU
time. Any of these saturating means the *client* limited the point.

Requests go through a streaming transport (anything with ``async stream(url, body) ->
RawResult``: :class:`pocforge.bench.rawhttp.RawTransport` or
:class:`pocforge.bench.client.AiohttpTransport`). During the measured phase the objects that
exist before it (tokenizer, dataset, bodies) are frozen out of the garbage collector's
reach (``gc.freeze``), so a collection never walks them in the middle of a stream; the
collector itself stays on, so long runs do not grow.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import gc
import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

import numpy as np

from pocforge.bench.client import Api, RawResult, build_payload
from pocforge.bench.datasets import RequestSpec
from pocforge.bench.measured import Measured
from pocforge.bench.records import RequestRecord
from pocforge.bench.request_metrics import build_record

LoadMode = Literal["concurrency", "rate", "trace"]
# Every firing of the probe that finds the loop idle is a wake-up of its own, and a wake-up
# costs 50-130 us of CPU on a small VM: at 10 ms the probe alone was a third of the client's
# CPU at 8 streams. 25 ms still samples a saturated loop 40 times a second.
PROBE_INTERVAL_S = 0.025


class StreamingTransport(Protocol):
    async def stream(self, url: str, body: bytes) -> RawResult: ...


@dataclass
class LoadSpec:
    mode: LoadMode
    value: float  # concurrency, request rate (req/s; inf = all at once) or trace speed
    num_requests: int | None = None
    duration_s: float | None = None
    burstiness: float = 1.0
    max_concurrency: int | None = None
    warmup: int = 0
    seed: int = 0


@dataclass
class RunOutcome:
    records: list[Measured]  # each request's figures; its whole record went to on_record
    duration_s: float
    sent: int
    send_span_s: float
    loop_lag_ms: list[float] = field(default_factory=list)
    cpu_s: float = 0.0
    interrupted: bool = False
    started_unix_s: float = 0.0  # Unix time of t0, the measured phase's start


def arrival_offsets(
    n: int,
    rate: float,
    burstiness: float,
    rng: np.random.Generator,
    duration_s: float | None = None,
) -> np.ndarray:
    """Send offsets (s) of an open-loop run: gamma inter-arrival gaps with mean 1/rate.

    The first request goes at 0, as in vLLM. With ``duration_s`` the count is whatever
    fits in the duration (``n`` is then ignored).
    """
    if math.isinf(rate):
        return np.zeros(n)
    scale = 1.0 / (rate * burstiness)
    if duration_s is not None:
        chunks, total = [], 0.0
        while total <= duration_s:
            g = rng.gamma(burstiness, scale, 1024)
            chunks.append(g)
            total += float(g.sum())
        gaps = np.concatenate(chunks)
        offs = np.concatenate([[0.0], np.cumsum(gaps)])
        return offs[offs < duration_s]
    gaps = rng.gamma(burstiness, scale, max(n - 1, 0))
    return np.concatenate([[0.0], np.cumsum(gaps)])[:n]


class _LagProbe:
    """A timer re-armed every ``PROBE_INTERVAL_S``; each firing records how late it came (ms).

    A plain callback, not a task that sleeps: the probe itself should cost the loop little.
    """

    def __init__(self, out: list[float]):
        self.out = out
        self.loop = asyncio.get_running_loop()
        self.due = time.perf_counter() + PROBE_INTERVAL_S
        self.handle = self.loop.call_later(PROBE_INTERVAL_S, self._tick)

    def _tick(self) -> None:
        now = time.perf_counter()
        self.out.append((now - self.due) * 1000.0)
        self.due = now + PROBE_INTERVAL_S
        self.handle = self.loop.call_later(PROBE_INTERVAL_S, self._tick)

    def stop(self) -> None:
        self.handle.cancel()


async def run_load(
    transport: StreamingTransport,
    url: str,
    api: Api,
    model: str,
    requests: list[RequestSpec],
    load: LoadSpec,
    *,
    point: str,
    repeat: int,
    ignore_eos: bool = True,
    extra_body: dict | None = None,
    on_record: Callable[[RequestRecord], None] | None = None,
    stop: asyncio.Event | None = None,
    count_tokens: Callable[[str], int] | None = None,
) -> RunOutcome:
    """Run one repeat of one point and return its records (send order not guaranteed)."""
    stop = stop or asyncio.Event()
    bodies = [
        build_payload(api, model, r.prompt, r.max_tokens, ignore_eos, extra_body) for r in requests
    ]
    n_req = len(requests)

    if load.warmup:
        await _warmup(transport, url, bodies, load)

    records: list[Measured] = []
    sent = 0
    last_send = 0.0
    gc.collect()
    gc.freeze()
    t0 = time.perf_counter()
    t0_unix = time.time()
    cpu0 = time.process_time()
    lag: list[float] = []
    probe = _LagProbe(lag)

    # Finished streams are parsed into records one per event-loop iteration, never in a
    # burst: when many streams end together (closed-loop waves), parsing them all at once
    # would stall the loop and delay the timestamps of every other stream.
    loop = asyncio.get_running_loop()
    pending: collections.deque = collections.deque()
    draining = False
    # a record that could not be written (the results disk is full): the load stops at
    # once and the error is raised when the requests in flight have ended
    broken: list[OSError] = []

    def drain_one() -> None:
        nonlocal draining
        if not pending:  # already drained synchronously at the end of the run
            draining = False
            return
        i, scheduled_s, raw = pending.popleft()
        spec = requests[i % n_req]
        rec = build_record(
            raw,
            api,
            point=point,
            repeat=repeat,
            index=i,
            t0=t0,
            scheduled_s=scheduled_s,
            prompt_tokens=spec.prompt_tokens,
            requested_output_tokens=spec.max_tokens,
            count_tokens=count_tokens,
        )
        rec.turn = spec.turn
        records.append(Measured(rec))
        if on_record is not None and not broken:
            try:
                on_record(rec)
            except OSError as exc:
                broken.append(exc)
                stop.set()
        if pending:
            loop.call_soon(drain_one)
        else:
            draining = False

    stream = transport.stream

    async def one(i: int, scheduled_s: float) -> None:
        nonlocal sent, last_send, draining
        sent += 1
        raw = await stream(url, bodies[i % n_req])
        last_send = max(last_send, raw.start - t0)
        pending.append((i, scheduled_s, raw))
        if not draining:
            draining = True
            loop.call_soon(drain_one)

    def more(i: int) -> bool:
        if load.duration_s is not None:
            return time.perf_counter() - t0 < load.duration_s
        return i < (load.num_requests or n_req)

    tasks: set[asyncio.Task] = set()
    if load.mode == "concurrency":
        counter = itertools.count()

        async def worker() -> None:
            ready = time.perf_counter() - t0
            while not stop.is_set():
                i = next(counter)
                if not more(i):
                    return
                await one(i, ready)
                ready = time.perf_counter() - t0

        main = asyncio.gather(*(worker() for _ in range(int(load.value))))
    else:
        main = asyncio.ensure_future(_open_loop(one, requests, load, t0, stop, tasks, more))

    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({main, stopper}, return_when=asyncio.FIRST_COMPLETED)
        interrupted = stop.is_set()
        if interrupted:
            main.cancel()
            for t in list(tasks):
                t.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await main
            await asyncio.gather(*tasks, return_exceptions=True)
        stopper.cancel()
        end = max((p[2].end for p in pending), default=0.0)
        while pending:  # every finished request is recorded, interrupted or not
            draining = True
            drain_one()
        # Duration: first send to last completion (draining is bookkeeping, not serving time).
        end = max([end] + [t0 + r.sent_s + (r.e2el_ms or 0.0) / 1000.0 for r in records])
        duration = end - t0 if records else time.perf_counter() - t0
        cpu = time.process_time() - cpu0
    finally:
        probe.stop()
        gc.unfreeze()
    if broken:
        raise broken[0]
    return RunOutcome(records, duration, sent, last_send, lag, cpu, interrupted, t0_unix)


async def _open_loop(
    one, requests, load: LoadSpec, t0: float, stop: asyncio.Event, tasks: set[asyncio.Task], more
) -> None:
    rng = np.random.default_rng(load.seed)
    if load.mode == "trace":
        offsets = np.asarray([r.at_s or 0.0 for r in requests]) / load.value
        if load.num_requests:
            offsets = offsets[: load.num_requests]
    else:
        offsets = arrival_offsets(
            load.num_requests or len(requests), load.value, load.burstiness, rng, load.duration_s
        )
    sem = asyncio.Semaphore(load.max_concurrency) if load.max_concurrency else None

    async def run(i: int, off: float) -> None:
        try:
            await one(i, off)
        finally:
            if sem is not None:
                sem.release()

    for i, off in enumerate(offsets):
        if stop.is_set() or (load.duration_s is not None and not more(i)):
            break
        delay = t0 + float(off) - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        if sem is not None:
            await sem.acquire()
        task = asyncio.create_task(run(i, float(off)))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    while tasks:
        await asyncio.gather(*list(tasks), return_exceptions=True)


async def _warmup(
    transport: StreamingTransport, url: str, bodies: list[bytes], load: LoadSpec
) -> None:
    width = int(load.value) if load.mode == "concurrency" else (load.max_concurrency or 8)
    sem = asyncio.Semaphore(max(1, width))

    async def go(i: int) -> None:
        async with sem:
            await transport.stream(url, bodies[i % len(bodies)])

    await asyncio.gather(*(go(i) for i in range(load.warmup)))
