"""The kit's own accuracy task, ``pocforge_arith``: two-number sums and differences with
exact answers, generated deterministically from a seed, so a CPU test and a customer
without internet access have a task that downloads nothing.

``python -m pocforge.quality.tasks.arith`` rewrites ``pocforge_arith.jsonl`` (a test
checks the shipped file equals the generator's output).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

DATA = Path(__file__).with_name("pocforge_arith.jsonl")
TASK = "pocforge_arith"


def problems(n: int = 200, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for index in range(n):
        a, b = rng.randint(2, 99), rng.randint(2, 99)
        if index % 2:
            a, b = max(a, b), min(a, b)
            out.append({"id": index, "question": f"What is {a} - {b}?", "answer": str(a - b)})
        else:
            out.append({"id": index, "question": f"What is {a} + {b}?", "answer": str(a + b)})
    return out


def jsonl(n: int = 200, seed: int = 0) -> str:
    return "".join(json.dumps(row, sort_keys=True) + "\n" for row in problems(n, seed))


def task_config(data: Path) -> dict:
    """lm-eval's task YAML for the data file at ``data`` (an absolute path: lm-eval loads
    it with the ``json`` builder of ``datasets``, offline)."""
    return {
        "task": TASK,
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": str(data)}},
        "test_split": "test",
        "fewshot_split": "test",
        "output_type": "generate_until",
        "doc_to_text": "Question: {{question}}\nAnswer:",
        "doc_to_target": "{{answer}}",
        "target_delimiter": " ",
        "generation_kwargs": {
            "until": ["\n", "Question:"],
            "do_sample": False,
            "temperature": 0.0,
            "max_gen_toks": 8,
        },
        "filter_list": [
            {
                "name": "first_number",
                "filter": [
                    {"function": "regex", "regex_pattern": r"(-?[0-9]+)"},
                    {"function": "take_first"},
                ],
            }
        ],
        "metric_list": [{"metric": "exact_match", "aggregation": "mean", "higher_is_better": True}],
        "metadata": {"version": 1.0},
    }


if __name__ == "__main__":
    DATA.write_text(jsonl())
