import sys

from pocforge.bench.config import SweepConfig
from pocforge.bench.datasets import DatasetConfig
from pocforge.bench.sweep import run_sweep

cfg = SweepConfig(
    base_url="http://127.0.0.1:8123",
    model="tiny-llama",
    api="chat",
    tokenizer="/tmp/rs/tiny-llama",
    dataset=DatasetConfig(kind="random", isl="64", osl="16"),
    mode="concurrency",
    values=[1, 2, 4, 8],
    num_prompts=60,
    repeats=2,
    warmup=2,
    slos=["ttft_ms:p90:5000", "tpot_ms:p90:50", "output_throughput:mean:20"],
    gpus=1,
    seed=0,
)
s = run_sweep(cfg, sys.argv[1])
print(s.status, [p.id for p in s.points], s.best_passing_point)
