"""The dashboard's "KV-cache reuse" part of a serving workload: how much of the prompt the
servers found in their prefix cache, and what that did to the time to first token.

``prefix_hit_rate`` is the servers' own count over each repeat (prompt tokens found in
the prefix cache / prompt tokens looked up; :data:`pocforge.bench.promscrape.SERVER_METRICS`),
present for any workload whose server reported it, 0 when caching was off. A multi-turn or
doc-QA workload also splits TTFT by turn (``ttft_first_turn_ms``: nothing of the
conversation cached yet; ``ttft_later_turns_ms``: the history may come from the cache), so
the gain of reuse reads off one point. Nothing is shown that was not measured.
"""

from __future__ import annotations

from typing import Any

from pocforge.results.stage_schema import ServingResult

HIT_RATE = "prefix_hit_rate"
TURNS = ("ttft_first_turn_ms", "ttft_later_turns_ms")
STATS = ("p50", "p90")


def rows(result: ServingResult) -> list[dict[str, Any]]:
    """One row per point with a hit rate or a TTFT by turn: the hit rate's mean over the
    repeats (and its 95% interval where they give one), the first and later turns' TTFT at
    :data:`STATS` (None where a turn was not measured), and the later turns' median
    against the first turn's (a change in percent)."""
    out = []
    for p in result.points:
        rate = p.metrics.get(HIT_RATE, {}).get("value")
        turns = {m: {s: p.metrics.get(m, {}).get(s) for s in STATS} for m in TURNS}
        if rate is None and not any(v is not None for t in turns.values() for v in t.values()):
            continue
        first, later = (turns[m]["p50"] for m in TURNS)
        out.append(
            {
                "id": p.id,
                "hit_rate": rate,
                "hit_rate_ci": p.ci.get(HIT_RATE, {}).get("value"),
                "turns": turns,
                # later turns' median TTFT against the first turn's, in percent
                "change_p50": 100 * (later / first - 1) if first and later is not None else None,
            }
        )
    return out


def has_turns(rows_: list[dict[str, Any]]) -> bool:
    """Whether any point has a TTFT by turn (a multi-turn or doc-QA workload)."""
    return any(v is not None for r in rows_ for t in r["turns"].values() for v in t.values())
