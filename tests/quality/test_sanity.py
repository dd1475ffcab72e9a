"""The sanity gate's judgement of one answer: a loop of one token, an empty or short answer
and a token count the server misreports each fail, naming the problem."""

from __future__ import annotations

from pocforge.quality.completions import Completion
from pocforge.quality.sanity import judge
from pocforge.spec.gates import SanityGate

GATE = SanityGate(max_tokens=8)


def answer(tokens, completion_tokens=None):
    return Completion(
        prompt="p", text="".join(tokens), tokens=tokens, completion_tokens=completion_tokens
    )


def test_varied_answer_passes():
    # the tiny random model's kind of output: garbage, but not a loop of one token
    assert (
        judge(answer(["56", " ten", "Q", "56", " ten", "ree", "ree", " 5"], 8), GATE).problems == []
    )


def test_one_token_loop_fails():
    (problem,) = judge(answer(["!"] * 8, 8), GATE).problems
    assert problem.startswith("repeats itself: 12% distinct tokens") and "8 × '!'" in problem


def test_empty_short_and_miscounted_answers_fail():
    problems = judge(answer([" "] * 3, 5), GATE).problems
    assert "empty output" in problems
    assert "3 tokens generated, 8 asked" in problems
    assert "usage says 5 completion tokens, the answer has 3" in problems
