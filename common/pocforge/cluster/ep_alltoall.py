"""The expert-parallel all-to-all benchmarks the collectives stage runs for a POC.

A deployment with expert parallelism moves every MoE layer's tokens through DeepEP-style
dispatch and combine kernels, so the collectives stage measures them with DeepEP's own
tests at the model's shape (the collectives role's ``collectives_ep_tests``; their output
becomes ``collectives/ep_alltoall-*.json``, judged as ``collectives.ep_dispatch.…``).
"""

from __future__ import annotations

from pocforge.catalog import gpu
from pocforge.spec import PocSpec
from pocforge.spec.planning import facts_of

# Where each vendor's DeepEP keeps the three tests, relative to the checkout
# (collectives_ep_dir): deepseek-ai/DeepEP moved them to tests/legacy/ with EPv2 (b306af0,
# 2026-04-30; read at dd758ca), ROCm/DeepEP keeps them in tests/ (read at 92b4ae1).
TESTS_FOLDER = {"nvidia": "tests/legacy", "amd": "tests"}


def expert_parallel_size(spec: PocSpec) -> int:
    """The largest expert-parallel group of the serving deployment (an aggregated
    deployment's ``parallelism.ep``, or either disaggregated pool's ``ep``); 1 without."""
    if spec.serving is None:
        return 1
    pools = spec.serving.disaggregation
    if pools is not None:
        return max(pools.prefill.ep, pools.decode.ep)
    return spec.serving.parallelism.ep


def ep_tests(spec: PocSpec) -> list[dict]:
    """``collectives_ep_tests`` for ``spec``: DeepEP's ``test_intranode.py`` on every node,
    ``test_internode.py`` across the nodes when an expert-parallel group spans nodes, and
    ``test_low_latency.py`` (across the nodes likewise); none for a deployment without
    expert parallelism or a CPU cluster.

    The arguments follow the tests' argparse (deepseek-ai/DeepEP dd758ca
    ``tests/legacy/test_{intranode,internode,low_latency}.py``; ROCm/DeepEP 92b4ae1
    ``tests/test_*.py`` takes the same flags, plus ``--backend`` for internode, left at its
    ``nccl`` default): ``--num-processes`` ranks per node, and the model's ``--hidden``,
    ``--num-topk`` and ``--num-experts`` where its facts say them (else DeepEP's defaults,
    DeepSeek-V3's shape). ``--num-tokens`` stays DeepEP's (4096 a rank for the normal
    kernels, 128 for low latency): a property of the load, not of the model.

    The tests' own constraints decide the rest: every test asserts ``num_experts % num_ranks
    == 0``, so experts are rounded up to a multiple of the ranks (as redundant experts pad
    them in SGLang's EPLB); test_internode.py asserts 8 ranks a node and more than 8 ranks,
    so it runs only on 8-GPU nodes; the intranode kernels take 2, 4 or 8 ranks (another
    expert-parallel size fails its run, which the health matrix shows). A run across nodes spans every node of the play (the
    role's WORLD_SIZE), its ranks ``nodes × gpus_per_node``.
    """
    ep = expert_parallel_size(spec)
    vendor = gpu(spec.cluster.gpu).vendor
    if ep <= 1 or vendor not in TESTS_FOLDER:
        return []
    facts = facts_of(spec)
    per_node = spec.cluster.gpus_per_node
    across = spec.cluster.nodes > 1 and ep > per_node
    folder = TESTS_FOLDER[vendor]

    def args(processes: int, ranks: int) -> str:
        flags = [f"--num-processes {processes}"]
        if facts.hidden:
            flags.append(f"--hidden {facts.hidden}")
        if facts.top_k:
            flags.append(f"--num-topk {facts.top_k}")
        if facts.experts:
            flags.append(f"--num-experts {-(-facts.experts // ranks) * ranks}")
        return " ".join(flags)

    local = min(ep, per_node)
    tests = [
        {"name": "intranode", "script": f"{folder}/test_intranode.py", "args": args(local, local)}
    ]
    everyone = spec.cluster.nodes * per_node
    if across and per_node == 8:
        tests.append(
            {
                "name": "internode",
                "script": f"{folder}/test_internode.py",
                "args": args(per_node, everyone),
                "across_nodes": True,
            }
        )
    low_latency = {
        "name": "low_latency",
        "script": f"{folder}/test_low_latency.py",
        "args": args(per_node, everyone) if across else args(local, local),
    }
    tests.append({**low_latency, "across_nodes": True} if across else low_latency)
    return tests
