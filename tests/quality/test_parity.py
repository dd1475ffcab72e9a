"""The parity comparison on the kit's own answer records: identical answers agree fully;
a shifted log-probability shows as a difference and a KL; a changed token is a
divergence at its position, compared up to and including it."""

from __future__ import annotations

import math

import pytest

from pocforge.quality.completions import Completion
from pocforge.quality.parity import PROMPTS, compare, compare_one
from pocforge.spec.gates import ParityGate

GATE = ParityGate(prompts=2, max_tokens=3, top_logprobs=2)


def answer(prompt, tokens, tops):
    return Completion(
        prompt=prompt,
        text="".join(tokens),
        tokens=tokens,
        token_logprobs=[top[t] for t, top in zip(tokens, tops, strict=True)],
        top_logprobs=tops,
    )


TOPS = [{"a": -0.1, "b": -2.5}, {"c": -0.2, "d": -1.9}, {"e": -0.3, "f": -1.5}]


def test_identical_answers_agree_completely():
    row = compare_one(answer("p", ["a", "c", "e"], TOPS), answer("p", ["a", "c", "e"], TOPS))
    assert row.same and row.first_divergence is None and row.positions == 3
    assert row.max_logprob_diff == 0 and row.kl == pytest.approx(0, abs=1e-12)


def test_a_changed_token_diverges_there_and_is_compared_up_to_it():
    other = [TOPS[0], {"c": -1.0, "d": -0.5}, {"x": -0.1}]
    row = compare_one(answer("p", ["a", "c", "e"], TOPS), answer("p", ["a", "d", "x"], other))
    assert not row.same and row.first_divergence == 1 and row.positions == 2
    assert row.max_logprob_diff == pytest.approx(1.4)  # |-1.9 - -0.5| at position 1
    # KL at position 1 over {c, d}, renormalised, averaged with position 0's 0
    pa = [math.exp(-0.2), math.exp(-1.9)]
    pb = [math.exp(-1.0), math.exp(-0.5)]
    pa, pb = [x / sum(pa) for x in pa], [x / sum(pb) for x in pb]
    kl1 = sum(a * math.log(a / b) for a, b in zip(pa, pb, strict=True))
    assert row.kl == pytest.approx(kl1 / 2)


def test_summary_over_prompts():
    base = [answer("p1", ["a", "c", "e"], TOPS), answer("p2", ["a", "c", "e"], TOPS)]
    shifted = [{k: v - 0.01 for k, v in top.items()} for top in TOPS]
    cand = [answer("p1", ["a", "c", "e"], TOPS), answer("p2", ["a", "c", "e"], shifted)]
    result = compare(base, cand, GATE, "vllm", "vllm + kit")
    assert result.token_agreement == 1.0 and result.first_divergence is None
    assert result.max_logprob_diff == pytest.approx(0.01)
    assert result.mean_logprob_diff == pytest.approx(0.005)  # half the compared values moved
    with pytest.raises(ValueError, match="different prompts"):
        compare(base, cand[::-1], GATE, "a", "b")


def test_the_fixed_prompts_cover_the_largest_gate():
    assert len(PROMPTS) >= ParityGate.model_fields["prompts"].metadata[1].le


def test_bisection_names_the_kernels_that_fail_on_their_own():
    from pocforge.quality.parity import bisect

    def trial(bad: set[str], tried: list):
        def fails(subset):
            tried.append(list(subset))
            return bool(bad & set(subset))

        return fails

    tried: list = []
    kernels = ["rms_norm", "silu_and_mul", "rotary_embedding", "fused_moe"]
    assert bisect(kernels, trial({"rotary_embedding"}, tried)) == ["rotary_embedding"]
    assert tried == [
        ["rms_norm", "silu_and_mul"],
        ["rotary_embedding", "fused_moe"],
        ["rotary_embedding"],
        ["fused_moe"],
    ]
    assert bisect(kernels, trial({"rms_norm", "fused_moe"}, [])) == ["rms_norm", "fused_moe"]
    # no part fails alone: nothing named at the top (the patches, or all together)
    assert bisect(kernels, lambda subset: False) == []
    # a pair that fails only together is named as the pair
    together = lambda subset: set(subset) >= {"rms_norm", "silu_and_mul"}  # noqa: E731
    assert bisect(kernels, together) == ["rms_norm", "silu_and_mul"]


def test_a_lone_kernel_is_named_only_when_its_own_trial_fails():
    """One kernel, and the candidate failed: the trial (the baseline with that kernel alone)
    tells the kernel from the candidate's framework patches."""
    from pocforge.quality.parity import bisect

    tried: list = []
    assert bisect(["rms_norm"], lambda subset: tried.append(subset) or True) == ["rms_norm"]
    assert tried == [["rms_norm"]]
    assert bisect(["rms_norm"], lambda subset: False) == []  # the patches, not the kernel


def test_bounds_come_from_the_pocs_parity_criteria_else_the_defaults():
    from pocforge.quality.parity import DEFAULT_BOUNDS, bounds, meets
    from pocforge.spec.acceptance_schema import AcceptanceSpec

    criteria = AcceptanceSpec.model_validate(
        {"criteria": ["parity.token_agreement >= 0.9", "serving.chat.ttft_ms.p99 <= 100"]}
    ).criteria
    assert bounds(criteria) == [("token_agreement", ">=", 0.9)]
    assert bounds([]) == list(DEFAULT_BOUNDS)

    class Result:
        token_agreement, max_logprob_diff = 0.95, None  # no log-probabilities: not held against

    assert meets(Result, [("token_agreement", ">=", 0.9), ("max_logprob_diff", "<=", 0.02)])
    assert not meets(Result, list(DEFAULT_BOUNDS))


@pytest.mark.process  # the run store records git provenance
def test_the_dashboard_names_the_bisections_culprits_and_lists_its_trials(tmp_path):
    from pocforge.report import render
    from pocforge.results.store import RunStore
    from pocforge.spec import load_poc

    base = [answer(p, ["a", "c", "e"], TOPS) for p in ("p1", "p2")]
    off = [answer("p1", ["a", "d", "x"], [TOPS[0], {"c": -1.0, "d": -0.5}, {"x": -0.1}])]
    result = compare(base, [*off, base[1]], GATE, "vllm with kit kernels: none", "kit")
    result.culprits = ["rms_norm"]
    result.trials = {
        "rms_norm": {"token_agreement": 0.5, "max_logprob_diff": 0.8, "meets_criteria": False},
        "silu_and_mul": {"token_agreement": 1.0, "max_logprob_diff": 0.0, "meets_criteria": True},
    }
    run = RunStore(tmp_path / "results").create(load_poc("demo"))
    with run.stage("parity") as stage:
        stage.write_json("result.json", result)
    run.finish()
    page = render(run.path).read_text()
    culprits = page[page.index('id="parity-culprits"') :].split("</p>", 1)[0]
    assert "rms_norm" in culprits and "silu_and_mul" not in culprits
    trials = page[page.index('class="parity-trials"') :].split("</table>", 1)[0]
    assert trials.count("<tr") == 3 and 'class="limited"><td>rms_norm' in trials
