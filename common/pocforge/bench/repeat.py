"""One repeat of one sweep point: warm-up, load, records, the client's health and the repeat's metrics."""

from __future__ import annotations

import asyncio
import math
from datetime import UTC, datetime
from typing import Literal

import numpy as np

from pocforge.bench.config import BenchError, SweepConfig
from pocforge.bench.datasets import FIXED_SETS, build_requests
from pocforge.bench.environment import check_server
from pocforge.bench.load import LoadSpec, run_load
from pocforge.bench.measured import Measured
from pocforge.bench.promscrape import Scraper, server_metrics
from pocforge.bench.records import RecordWriter, RequestRecord
from pocforge.bench.run_metrics import (
    peak_concurrency,
    run_metrics,
)
from pocforge.bench.summary import (
    ClientHealth,
    RepeatResult,
)
from pocforge.bench.tokenizer import Tokenizer
from pocforge.stats import describe

GOODPUT_METRICS = ("ttft_ms", "tpot_ms", "e2el_ms")


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class Progress:
    """Hooks a front end implements to show progress; the default shows nothing."""

    def start(self, point: str, repeat: int, total: int | None) -> None: ...

    def advance(self, record: RequestRecord) -> None: ...

    def end(self) -> None: ...


def _client_health(
    cfg: SweepConfig, lag: list[float], records: list[Measured], cpu_s: float, wall_s: float
) -> ClientHealth:
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
    return ClientHealth(
        limited=bool(reasons),
        reasons=reasons,
        loop_lag_ms=loop,
        send_delay_ms=send,
        cpu_s=cpu_s,
        cpu_utilisation=util,
        cpu_ms_per_chunk=cpu_s * 1000.0 / chunks if chunks else None,
    )


def _goodput_thresholds(cfg: SweepConfig) -> dict[str, float]:
    out = {}
    for s in cfg.slos:
        if s.metric in GOODPUT_METRICS:
            out[s.metric] = min(out.get(s.metric, math.inf), s.threshold)
    return out


async def run_repeat(
    cfg: SweepConfig,
    session,
    transport,
    url: str,
    tok: Tokenizer | None,
    pid: str,
    p_idx: int,
    value: float,
    rep: int,
    writer: RecordWriter,
    progress: Progress,
    stop: asyncio.Event,
) -> tuple[RepeatResult, list[Measured]]:
    started = now()
    empty = ClientHealth(
        limited=False,
        loop_lag_ms=describe([]),
        send_delay_ms=describe([]),
        cpu_s=0.0,
        cpu_utilisation=0.0,
    )

    def failed(msg: str) -> tuple[RepeatResult, list[Measured]]:
        return RepeatResult(
            repeat=rep,
            status="failed",
            error=msg,
            started_at=started,
            duration_s=0.0,
            requests_sent=0,
            completed=0,
            failed=0,
            offered_rate=None,
            achieved_rate=None,
            peak_concurrency=0,
            metrics={},
            client=empty,
        ), []

    try:
        await check_server(session, cfg.base_url, None)
    except BenchError as exc:
        return failed(str(exc))
    # Distinct prompts per point and repeat: a server's prefix cache must not see repeats.
    n = cfg.num_prompts or 1000
    ds = cfg.dataset.model_copy(
        update={
            "seed": int(np.random.SeedSequence([cfg.dataset.seed, p_idx, rep]).generate_state(1)[0])
        }
    )
    if cfg.dataset.kind == "trace":
        reqs = build_requests(ds, cfg.num_prompts or 0, tok)
        warm, main_reqs = reqs[: cfg.warmup], reqs
    elif cfg.dataset.kind in FIXED_SETS:
        # conversations or documents of their own for the warm-up: sharing the measured
        # ones would cache their first turn before it is timed
        main_reqs = build_requests(ds, 0, tok)
        other = ds.model_copy(update={"seed": ds.seed + 1})
        warm = build_requests(other, 0, tok)[: cfg.warmup] if cfg.warmup else []
    else:
        reqs = build_requests(ds, n + cfg.warmup, tok)
        warm, main_reqs = reqs[n:], reqs[:n]
    load = LoadSpec(
        mode=cfg.mode,
        value=value,
        num_requests=None if cfg.duration_s else len(main_reqs),
        duration_s=cfg.duration_s,
        burstiness=cfg.burstiness,
        max_concurrency=cfg.max_concurrency,
        warmup=0,
        seed=cfg.seed + 7919 * p_idx + rep,
    )
    if warm:
        wload = LoadSpec(
            mode="concurrency",
            value=value if cfg.mode == "concurrency" else (cfg.max_concurrency or 8),
            num_requests=len(warm),
        )
        await run_load(
            transport,
            url,
            cfg.api,
            cfg.model,
            warm,
            wload,
            point=pid,
            repeat=rep,
            ignore_eos=cfg.ignore_eos,
            extra_body=cfg.extra_body,
            stop=stop,
        )
    scraper = Scraper(session, cfg.base_url) if cfg.scrape_metrics else None
    if scraper:
        await scraper.start()
    progress.start(pid, rep, None if cfg.duration_s else len(main_reqs))

    def on_record(rec: RequestRecord) -> None:
        writer.add(rec)
        progress.advance(rec)

    outcome = await run_load(
        transport,
        url,
        cfg.api,
        cfg.model,
        main_reqs,
        load,
        point=pid,
        repeat=rep,
        ignore_eos=cfg.ignore_eos,
        extra_body=cfg.extra_body,
        on_record=on_record,
        stop=stop,
        count_tokens=tok.count if tok else None,
    )
    progress.end()
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
    metrics.update(server_metrics(server))
    result = RepeatResult(
        repeat=rep,
        status=status,
        error=error,
        started_at=started,
        duration_s=outcome.duration_s,
        started_unix_s=outcome.started_unix_s,
        requests_sent=outcome.sent,
        completed=done,
        failed=len(recs) - done,
        offered_rate=offered,
        achieved_rate=achieved,
        peak_concurrency=peak_concurrency(recs),
        metrics=metrics,
        client=_client_health(cfg, outcome.loop_lag_ms, recs, outcome.cpu_s, outcome.duration_s),
        server=server,
    )
    return result, recs
