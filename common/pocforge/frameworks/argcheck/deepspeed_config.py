"""Check DeepSpeed configs with DeepSpeed's own ``DeepSpeedConfig``, and find top-level keys
it never reads (it accepts those silently: ``zero_optimisation`` would train without ZeRO)."""

import json
import os
import sys

os.environ.setdefault("DS_ACCELERATOR", "cpu")


class Tracked(dict):
    """A config that remembers which keys DeepSpeed looked at."""

    def __init__(self, data):
        super().__init__(data)
        self.seen = set()

    def __getitem__(self, key):
        self.seen.add(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self.seen.add(key)
        return super().get(key, default)

    def __contains__(self, key):
        self.seen.add(key)
        return super().__contains__(key)


def main() -> None:
    from deepspeed.runtime.config import DeepSpeedConfig

    results = []
    for raw in json.load(sys.stdin):
        config = Tracked(raw)
        problems = []
        try:
            DeepSpeedConfig(config)
        except Exception as exc:  # DeepSpeed raises assorted types for a bad config
            problems.append(" ".join(str(exc).split()))
        problems += [
            f"unknown top-level key {key!r}: DeepSpeed ignores it silently"
            for key in raw
            if key not in config.seen
        ]
        results.append("; ".join(problems) or None)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
