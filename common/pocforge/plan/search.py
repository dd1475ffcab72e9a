"""Every valid layout for a cluster, filtered by memory and the customer's SLOs, ranked by
throughput per GPU at the SLO.

Serving: a replica of ``tp × pp × dp`` GPUs (``tp × pp`` with DP-attention) repeated over
the cluster; for each, the highest-throughput concurrency (a doubling ladder up to what
the KV cache holds) whose predicted TTFT and TPOT meet the SLOs. Training: ``tp × pp ×
cp × dp`` = all GPUs, with EP for MoE, the ZeRO stage (DeepSpeed: data parallel only),
the micro-batch and recompute when activations do not fit.

Validity follows the frameworks: attention heads divisible by TP (KV heads divide TP or
TP divides them), experts divisible by EP, vLLM's EP spanning TP × DP, DP-attention only
on SGLang, PP no deeper than the layers.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from pocforge.plan.hardware import Device
from pocforge.plan.layout import Layout, layout_problems
from pocforge.plan.serving import Serving, ServingPoint, ServingPrediction, doubling
from pocforge.plan.shape import Shape
from pocforge.plan.training import Training, TrainingPoint, TrainingPrediction


@dataclass(frozen=True)
class Slos:
    """Upper bounds in milliseconds (None: no bound), on the predicted p50."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None

    def violated(self, p: ServingPrediction) -> str | None:
        if self.ttft_ms is not None and p.ttft_ms > self.ttft_ms:
            return f"TTFT {p.ttft_ms:.0f} ms > {self.ttft_ms:g} ms"
        if self.tpot_ms is not None and p.tpot_ms > self.tpot_ms:
            return f"TPOT {p.tpot_ms:.1f} ms > {self.tpot_ms:g} ms"
        return None


@dataclass
class Candidate:
    layout: Layout
    replicas: int
    prediction: ServingPrediction | TrainingPrediction | None
    concurrency: int | None = None  # per replica, serving
    rejected: str | None = None
    score: float = 0.0  # throughput per GPU at the SLO

    def as_dict(self) -> dict:
        out = {
            "layout": self.layout.label(),
            "tp": self.layout.tp,
            "pp": self.layout.pp,
            "dp": self.layout.dp,
            "ep": self.layout.ep,
            "dp_attention": self.layout.dp_attention,
            "replicas": self.replicas,
            "score": round(self.score, 3),
            "rejected": self.rejected,
        }
        if self.layout.cp > 1 or self.layout.zero or self.layout.micro_batch > 1:
            out |= {
                "cp": self.layout.cp,
                "zero": self.layout.zero,
                "micro_batch": self.layout.micro_batch,
                "recompute": self.layout.recompute,
            }
        if self.concurrency is not None:
            out["concurrency"] = self.concurrency
        if self.prediction is not None:
            out["prediction"] = self.prediction.as_dict()
        return out


@dataclass
class SearchResult:
    ranked: list[Candidate] = field(default_factory=list)
    rejected: list[Candidate] = field(default_factory=list)

    @property
    def best(self) -> Candidate | None:
        return self.ranked[0] if self.ranked else None


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _powers_of_two(limit: int) -> list[int]:
    out, p = [], 1
    while p <= limit:
        out.append(p)
        p *= 2
    return out


def _tp_ok(shape: Shape, tp: int) -> bool:
    if shape.heads % tp:
        return False
    return shape.is_mla or tp % shape.kv_heads == 0 or shape.kv_heads % tp == 0


def serving_layouts(shape: Shape, total_gpus: int, framework: str) -> Iterator[Layout]:
    """Every valid replica layout whose GPU count divides ``total_gpus``."""
    for size in _divisors(total_gpus):
        for tp in _powers_of_two(size):
            if size % tp or not _tp_ok(shape, tp):
                continue
            for pp in _divisors(size // tp):
                if pp > min(shape.layers, 16):
                    continue
                dp = size // (tp * pp)
                if framework == "trtllm" and dp > 1:
                    continue  # one trtllm-serve is one copy: replicas, not dp (spec/serving_rules.py)
                yield from _with_experts(shape, Layout(tp=tp, pp=pp, dp=dp), framework)
                if framework == "sglang" and dp == 1 and (shape.is_moe or shape.is_mla):
                    for groups in _divisors(tp)[1:]:
                        dpa = Layout(tp=tp, pp=pp, dp=groups, dp_attention=True)
                        yield from _with_experts(shape, dpa, framework)


def _with_experts(shape: Shape, layout: Layout, framework: str) -> Iterator[Layout]:
    """``layout`` and its expert-parallel variants, each only where the framework runs it
    (:func:`~pocforge.plan.layout.layout_problems`, as ``validate`` holds a spec to)."""
    experts = shape.experts if shape.is_moe else None
    if not layout_problems(framework, layout, experts):
        yield layout
    if not shape.is_moe:
        return
    span = layout.tp if layout.dp_attention else layout.tp * layout.dp
    for ep in sorted({layout.tp, span}):
        variant = layout.with_(ep=ep)
        if ep > 1 and not layout_problems(framework, variant, experts):
            yield variant


def search_serving(
    shape: Shape,
    device: Device,
    total_gpus: int,
    point: ServingPoint,
    framework: str = "vllm",
    precision: str = "bf16",
    kv_dtype: str = "bf16",
    slos: Slos | None = None,
    memory_fraction: float | None = None,
) -> SearchResult:
    """Rank every serving layout of ``total_gpus`` for ``point``'s ISL/OSL. The point's
    concurrency is the cluster's ceiling; each replica gets its share."""
    slos = slos or Slos()
    result = SearchResult()
    for layout in serving_layouts(shape, total_gpus, framework):
        replicas = total_gpus // layout.gpus
        model = Serving(shape, layout, device, framework, precision, kv_dtype, memory_fraction)
        ceiling = max(1, point.concurrency // replicas)
        first = model.predict(ServingPoint(point.isl, point.osl, 1))
        if not first.fits:
            result.rejected.append(Candidate(layout, replicas, first, 1, first.why))
            continue
        best: tuple[float, int, ServingPrediction] | None = None
        why = None
        for c in doubling(min(ceiling, max(first.max_concurrency, 1))):
            p = first if c == 1 else model.predict(ServingPoint(point.isl, point.osl, c))
            violated = slos.violated(p)
            if violated:
                why = why or violated
                break  # latency only grows with concurrency
            if best is None or p.output_tput_per_gpu > best[0]:
                best = (p.output_tput_per_gpu, c, p)
        if best is None:
            result.rejected.append(
                Candidate(layout, replicas, first, 1, f"no concurrency meets the SLOs: {why}")
            )
            continue
        result.ranked.append(Candidate(layout, replicas, best[2], best[1], score=best[0]))
    result.ranked.sort(key=lambda c: -c.score)
    return result


def training_layouts(
    shape: Shape, total_gpus: int, framework: str, global_batch: int
) -> Iterator[Layout]:
    for tp in _powers_of_two(min(total_gpus, 8 if framework == "megatron" else 1)):
        if not _tp_ok(shape, tp) or total_gpus % tp:
            continue
        for pp in _divisors(total_gpus // tp) if framework == "megatron" else [1]:
            if pp > min(shape.layers, 32):
                continue
            rest = total_gpus // (tp * pp)
            for cp in _powers_of_two(min(rest, 8)) if framework == "megatron" else [1]:
                if rest % cp:
                    continue
                dp = rest // cp
                if global_batch % dp:
                    continue
                eps = [1]
                if shape.is_moe:
                    eps += [e for e in _divisors(dp * tp)[1:] if shape.experts % e == 0 and e <= 64]
                zeros = [1] if framework == "megatron" else [0, 1, 2, 3]
                for ep in eps:
                    for zero in zeros:
                        for mb in (1, 2, 4, 8):
                            if (global_batch // dp) % mb:
                                continue
                            yield Layout(
                                tp=tp, pp=pp, dp=dp, ep=ep, cp=cp, zero=zero, micro_batch=mb
                            )


def search_training(
    shape: Shape,
    device: Device,
    total_gpus: int,
    point: TrainingPoint,
    framework: str = "megatron",
    precision: str = "bf16",
) -> SearchResult:
    result = SearchResult()
    for layout in training_layouts(shape, total_gpus, framework, point.global_batch):
        model = Training(shape, layout, device, framework, precision)
        p = model.predict(point)
        if not p.fits:
            full = layout.with_(recompute="full")
            p_full = Training(shape, full, device, framework, precision).predict(point)
            if p_full.fits:
                layout, p = full, p_full
        if p.fits:
            result.ranked.append(Candidate(layout, 1, p, score=p.tokens_per_s_per_gpu))
        else:
            result.rejected.append(Candidate(layout, 1, p, rejected=p.why))
    result.ranked.sort(key=lambda c: -c.score)
    return result
