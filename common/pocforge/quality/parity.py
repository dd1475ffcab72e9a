"""The parity gate: the same fixed prompts served by the POC's configuration (its kit
kernels, its patches) and by a baseline (the framework's own kernels), compared token by
token and log-probability by log-probability.

Per prompt: whether the greedy continuations are identical and where they first diverge;
over the positions whose prefixes are the same on both sides (up to and including the
first divergence), the absolute
difference of the log-probabilities of the tokens in both top-k lists, and the KL
divergence KL(baseline ‖ candidate) of the next-token distributions restricted to the
tokens in both top-k lists and renormalised there (an approximation: the full
distributions are not exposed by the servers; identical kernels give 0 either way).
"""

from __future__ import annotations

import math

from pydantic import BaseModel, Field

from pocforge.quality.completions import Completion, complete
from pocforge.spec.gates import ParityGate
from pocforge.stats import decide

SCHEMA_VERSION = 1

# Fixed prompts: varied text, code and numbers, so a kernel that is wrong only for some
# activations shows up in a few of them. Deterministic, no data set needed.
PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):",
    "In 1969, the first humans",
    "Translate to German: Good morning, how are you?",
    "The quick brown fox",
    "SELECT name, price FROM products WHERE",
    "1, 1, 2, 3, 5, 8,",
    "Photosynthesis converts",
    "Dear customer, thank you for",
    "import numpy as np\nx = np.",
    "The three laws of motion are",
    "Once upon a time, in a small village,",
    "A GPU is faster than a CPU for",
    "<html><body><h1>",
    "The mitochondria is",
    "Q: What is 17 times 3?\nA:",
    "Shakespeare wrote",
    "To make a cup of tea, first",
    "The square root of 144 is",
    "Water boils at",
    'git commit -m "',
    "The largest ocean on Earth is",
    "Here is a haiku about winter:",
    "for (int i = 0; i <",
    "The stock market fell because",
    "Rome was not built",
    "E = mc^2 means that",
    "My favourite programming language is",
    "The patient presented with",
    "According to the contract, the tenant",
    "Zebras are",
    "The year 2024 was",
] * 2


class PromptParity(BaseModel):
    prompt: str
    same: bool
    first_divergence: int | None = Field(
        description="First differing token position; None if same."
    )
    baseline: str
    candidate: str
    positions: int = Field(description="Positions compared (up to the first divergence).")
    max_logprob_diff: float | None
    kl: float | None = Field(description="Mean KL over the compared positions.")


class ParityResult(BaseModel):
    kind: str = "pocforge-parity"
    schema_version: int = SCHEMA_VERSION
    baseline: str = Field(description="What served the baseline answers.")
    candidate: str = Field(description="What served the candidate answers.")
    prompts: int
    max_tokens: int
    top_logprobs: int
    token_agreement: float = Field(description="Share of prompts with identical continuations.")
    first_divergence: int | None = Field(description="Earliest divergence over all prompts.")
    max_logprob_diff: float | None
    mean_logprob_diff: float | None
    kl: float | None = Field(description="Mean KL(baseline ‖ candidate) over compared positions.")
    max_kl: float | None
    notes: list[str] = Field(default_factory=list)
    culprits: list[str] = Field(
        default_factory=list,
        description="The kit kernels that fail parity on their own (bisection).",
    )
    trials: dict[str, dict] = Field(
        default_factory=dict,
        description="Each bisection trial: its kernels (comma-joined) -> its agreement, largest log-prob difference and whether it met the criteria.",
    )
    per_prompt: list[PromptParity]
    definitions: dict[str, str] = Field(default_factory=dict)


DEFINITIONS = {
    "token_agreement": "Share of prompts whose greedy continuations are token for token identical.",
    "first_divergence": "Earliest token position (0-based) where a continuation differs.",
    "max_logprob_diff": "Largest |log p_baseline - log p_candidate| over the tokens in both top-k lists, at the positions up to and including the first divergence.",
    "mean_logprob_diff": "Mean of those absolute differences.",
    "kl": "Mean KL(baseline ‖ candidate) of the next-token distributions restricted to the tokens in both top-k lists and renormalised there.",
}


def collect(base_url: str, model: str, gate: ParityGate) -> list[Completion]:
    """The gate's prompts answered greedily with top-k log-probabilities."""
    return [
        complete(base_url, model, prompt, gate.max_tokens, top_logprobs=gate.top_logprobs)
        for prompt in PROMPTS[: gate.prompts]
    ]


def _kl(a: dict[str, float], b: dict[str, float]) -> float | None:
    common = [t for t in a if t in b]
    if not common:
        return None
    za = math.log(sum(math.exp(a[t]) for t in common))
    zb = math.log(sum(math.exp(b[t]) for t in common))
    return sum(math.exp(a[t] - za) * ((a[t] - za) - (b[t] - zb)) for t in common)


def compare_one(baseline: Completion, candidate: Completion) -> PromptParity:
    a, b = baseline.tokens, candidate.tokens
    first = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
    if first is None and len(a) != len(b):
        first = min(len(a), len(b))
    # Up to and including the first divergence: the prefix before it is the same on both
    # sides, so the two next-token distributions there are comparable.
    shared = first + 1 if first is not None else len(a)
    diffs, kls = [], []
    for j in range(min(shared, len(baseline.top_logprobs), len(candidate.top_logprobs))):
        top_a, top_b = baseline.top_logprobs[j], candidate.top_logprobs[j]
        diffs += [abs(top_a[t] - top_b[t]) for t in top_a if t in top_b]
        if (kl := _kl(top_a, top_b)) is not None:
            kls.append(kl)
    return PromptParity(
        prompt=baseline.prompt,
        same=first is None,
        first_divergence=first,
        baseline=baseline.text,
        candidate=candidate.text,
        positions=shared,
        max_logprob_diff=max(diffs) if diffs else None,
        kl=sum(kls) / len(kls) if kls else None,
    )


def compare(
    baseline: list[Completion],
    candidate: list[Completion],
    gate: ParityGate,
    baseline_label: str,
    candidate_label: str,
    notes: list[str] = (),
) -> ParityResult:
    if [c.prompt for c in baseline] != [c.prompt for c in candidate]:
        raise ValueError("baseline and candidate answered different prompts")
    rows = [compare_one(a, b) for a, b in zip(baseline, candidate, strict=True)]
    diffs = [r.max_logprob_diff for r in rows if r.max_logprob_diff is not None]
    all_diffs = []
    for a, b, row in zip(baseline, candidate, rows, strict=True):
        for j in range(min(row.positions, len(a.top_logprobs), len(b.top_logprobs))):
            all_diffs += [
                abs(a.top_logprobs[j][t] - b.top_logprobs[j][t])
                for t in a.top_logprobs[j]
                if t in b.top_logprobs[j]
            ]
    kls = [r.kl for r in rows if r.kl is not None]
    divergences = [r.first_divergence for r in rows if r.first_divergence is not None]
    return ParityResult(
        baseline=baseline_label,
        candidate=candidate_label,
        prompts=len(rows),
        max_tokens=gate.max_tokens,
        top_logprobs=gate.top_logprobs,
        token_agreement=sum(r.same for r in rows) / len(rows),
        first_divergence=min(divergences) if divergences else None,
        max_logprob_diff=max(diffs) if diffs else None,
        mean_logprob_diff=sum(all_diffs) / len(all_diffs) if all_diffs else None,
        kl=sum(kls) / len(kls) if kls else None,
        max_kl=max(kls) if kls else None,
        notes=list(notes),
        per_prompt=rows,
        definitions=DEFINITIONS,
    )


# What the bisection holds a trial to when the POC's criteria say nothing about parity:
# the example criteria.
DEFAULT_BOUNDS = (("token_agreement", ">=", 0.99), ("max_logprob_diff", "<=", 0.02))


def bounds(criteria) -> list[tuple[str, str, float]]:
    """The POC's criteria on ``parity.<metric>`` as (metric, op, threshold), else the
    defaults."""
    found = [
        (c.metric.split(".", 1)[1], c.op, c.threshold)
        for c in criteria
        if c.metric.startswith("parity.")
    ]
    return found or list(DEFAULT_BOUNDS)


def meets(result: ParityResult, limits: list[tuple[str, str, float]]) -> bool:
    """The result's point values within every bound (a metric not measured, e.g. no
    log-probabilities, does not count against it)."""
    for metric, op, threshold in limits:
        value = getattr(result, metric, None)
        if isinstance(value, int | float) and decide(op, threshold, value, value) != "pass":
            return False
    return True


def bisect(kernels: list[str], fails, top: bool = True) -> list[str]:
    """The kernels that fail on their own, given that ``kernels`` together fail:
    ``fails(subset)`` serves the subset and says whether it fails. Halves are tried in
    turn and a failing half split again, so one culprit among k costs about 2·log2(k)
    trials. Below the top, a part that fails while neither of its halves does is named
    whole (its kernels fail only together); at the top, none: what failed was not the
    kernels alone (the candidate's framework patches, or all of them together)."""
    if len(kernels) == 1:  # below the top its own trial has failed; at the top, try it
        return list(kernels) if not top or fails(kernels) else []
    half = len(kernels) // 2
    found = []
    for part in (kernels[:half], kernels[half:]):
        if fails(part):
            found += bisect(part, fails, top=False)
    return found if found or top else list(kernels)
