"""The shipped table of published accuracy scores: every entry names its source, and the
criterion proposed from it is named as a run names lm-eval's metrics."""

from __future__ import annotations

import json

import pytest

from pocforge.quality.accuracy import parse_output
from pocforge.quality.scores import _table, kit_metric, proposals, published_scores
from pocforge.spec.gates import AccuracyTask

from ..conftest import REPO

DATA = REPO / "tests" / "data" / "quality"


def test_every_score_has_a_pinned_source_and_a_known_task():
    table = _table()
    assert len(table.scores) >= 8
    for score in table.scores:
        assert score.source.startswith("https://github.com/") and "/blob/" in score.source
        commit = score.source.split("/blob/")[1].split("/")[0]
        assert len(commit) == 40, score.source  # pinned to the commit it was read from
        assert score.task in table.tasks
        for key in score.values:
            assert key.split(",")[1] in table.tasks[score.task]["filters"], key


def test_a_proposal_is_the_score_less_its_sources_tolerance():
    (p,) = proposals("META-LLAMA/Meta-Llama-3-8B-Instruct")  # any case
    assert p.key == "exact_match,strict-match"
    assert p.threshold == pytest.approx(0.718)  # 0.756 x 0.95, rounded down
    assert p.criterion == "accuracy.gsm8k.exact_match >= 0.718"
    assert p.task_entry == {
        "name": "gsm8k",
        "task": "gsm8k",
        "num_fewshot": 5,
        "limit": 250,
        "include": "tasks/gsm8k",
    }
    AccuracyTask.model_validate(p.task_entry)  # a valid spec entry
    assert proposals("acme/unknown") == [] and published_scores("") == []


def test_the_proposed_metric_is_the_name_a_run_gives_it(tmp_path):
    """lm-eval's results for a two-filter task (the real file's layout, gsm8k's filters in
    lm-eval's order): the run names the first filter's score as the proposal does."""
    real = json.loads((DATA / "lm_eval_0.4.13_results_pocforge_arith.json").read_text())
    real["results"] = {
        "gsm8k": {
            "alias": "gsm8k",
            "exact_match,strict-match": 0.75,
            "exact_match_stderr,strict-match": 0.02,
            "exact_match,flexible-extract": 0.76,
            "exact_match_stderr,flexible-extract": 0.02,
        }
    }
    real["n-samples"] = {"gsm8k": {"original": 1319, "effective": 250}}
    (tmp_path / "results_x.json").write_text(json.dumps(real))
    got = parse_output(tmp_path, AccuracyTask(name="gsm8k", limit=250), "gsm8k", 1.0)
    assert got.metrics[kit_metric("gsm8k", "exact_match,strict-match")].value == 0.75
    assert got.metrics[kit_metric("gsm8k", "exact_match,flexible-extract")].value == 0.76
