"""Scrape the server's Prometheus ``/metrics`` around a sweep point.

Before and after each point the kit reads every ``vllm:`` / ``sglang:`` sample (summed over
label sets; histogram buckets dropped, their ``_sum``/``_count`` kept) and stores both and
their difference; while the point runs it polls the gauges (KV-cache usage, running and
waiting requests) once a second, because right after a point they are back to zero and only
the peak says how loaded the server was. Parsing is prometheus_client's.
"""

from __future__ import annotations

import asyncio
import contextlib

import aiohttp
from pydantic import BaseModel, ConfigDict, Field

PREFIXES = ("vllm:", "sglang:")
# Gauges whose peak during a point matters; names differ across server versions.
PEAK_GAUGES = (
    "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc",
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "sglang:token_usage",
    "sglang:num_running_reqs",
    "sglang:num_queue_reqs",
)
KEY_COUNTERS = (
    "vllm:num_preemptions_total",
    "vllm:num_preemptions",
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:prefix_cache_hits_total",
    "vllm:prefix_cache_queries_total",
)


class ServerMetrics(BaseModel):
    """What the server's own metrics said about one run of a point."""

    model_config = ConfigDict(extra="forbid")

    scraped: bool
    error: str | None = None
    url: str
    before: dict[str, float] = Field(default_factory=dict)
    after: dict[str, float] = Field(default_factory=dict)
    delta: dict[str, float] = Field(
        default_factory=dict, description="after - before, every sample."
    )
    peak: dict[str, float] = Field(
        default_factory=dict, description="Max of polled gauges during the run."
    )
    polls: int = 0
    engines: dict[str, dict[str, float]] = Field(
        default_factory=dict,
        description="Per engine (vLLM's `engine` label: one per data-parallel rank), the change "
        "of its request and token counters during the run: how the load spread over the ranks.",
    )


# Counters worth keeping per data-parallel engine (vLLM labels every sample with `engine`).
ENGINE_COUNTERS = (
    "vllm:request_success_total",
    "vllm:generation_tokens_total",
    "vllm:prompt_tokens_total",
)


def parse_engines(text: str) -> dict[str, dict[str, float]]:
    """Engine label -> {counter: value summed over its other labels} for ENGINE_COUNTERS."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, dict[str, float]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            engine = s.labels.get("engine")
            if engine is None or s.name not in ENGINE_COUNTERS:
                continue
            per = out.setdefault(engine, {})
            per[s.name] = per.get(s.name, 0.0) + float(s.value)
    return out


def parse_metrics(text: str) -> dict[str, float]:
    """Sample name -> value summed over label sets, for the server prefixes."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if not s.name.startswith(PREFIXES) or s.name.endswith(("_bucket", "_created")):
                continue
            out[s.name] = out.get(s.name, 0.0) + float(s.value)
    return out


async def scrape_text(session: aiohttp.ClientSession, url: str, timeout_s: float = 5.0) -> str:
    async with session.get(url, timeout=aiohttp.ClientTimeout(total=timeout_s)) as resp:
        resp.raise_for_status()
        return await resp.text()


async def scrape(
    session: aiohttp.ClientSession, url: str, timeout_s: float = 5.0
) -> dict[str, float]:
    return parse_metrics(await scrape_text(session, url, timeout_s))


class Scraper:
    """``await start()`` before a point, ``await stop()`` after; never raises."""

    def __init__(self, session: aiohttp.ClientSession, base_url: str, poll_s: float = 1.0):
        self.session = session
        self.result = ServerMetrics(scraped=False, url=base_url.rstrip("/") + "/metrics")
        self.poll_s = poll_s
        self._task: asyncio.Task | None = None

    async def _try(self) -> dict[str, float] | None:
        try:
            return await scrape(self.session, self.result.url)
        except Exception as exc:  # noqa: BLE001 - a scrape failure is recorded, not raised
            self.result.error = f"{type(exc).__name__}: {exc}"
            return None

    async def _engines(self) -> dict[str, dict[str, float]]:
        try:
            return parse_engines(await scrape_text(self.session, self.result.url))
        except Exception:  # noqa: BLE001 - the per-engine view is extra; the totals stand alone
            return {}

    async def start(self) -> None:
        before = await self._try()
        if before is not None:
            self.result.before = before
            self._engines_before = await self._engines()
            self._task = asyncio.create_task(self._poll())

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self.poll_s)
            snap = await self._try()
            if snap is None:
                continue
            self.result.polls += 1
            for g in PEAK_GAUGES:
                if g in snap:
                    self.result.peak[g] = max(self.result.peak.get(g, snap[g]), snap[g])

    async def stop(self) -> ServerMetrics:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if not self.result.before:
            return self.result
        after = await self._try()
        if after is not None:
            self.result.after = after
            self.result.delta = {k: after[k] - self.result.before.get(k, 0.0) for k in after}
            self.result.scraped = True
            self.result.error = None
            start = getattr(self, "_engines_before", {})
            self.result.engines = {
                engine: {k: v - start.get(engine, {}).get(k, 0.0) for k, v in counters.items()}
                for engine, counters in (await self._engines()).items()
            }
        return self.result
