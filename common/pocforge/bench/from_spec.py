"""The serving benchmark's configuration for one workload of a POC spec.

The spec's typed objects go through as they are: its token-length distributions are the
dataset's (:class:`pocforge.spec.serving_schema.Lengths`), its SLOs become the benchmark's
:class:`~pocforge.bench.verdicts.SLO` objects. Used by ``pocforge run`` on this machine and
by the cluster stage, which renders the same configuration as ``pocforge bench serve``
arguments for node 0.
"""

from __future__ import annotations

from pathlib import Path

from pocforge.bench.config import SweepConfig
from pocforge.bench.datasets import DatasetConfig
from pocforge.bench.verdicts import SLO
from pocforge.spec import PocSpec
from pocforge.spec.serving_schema import Slo, Workload


def slo(spec_slo: Slo) -> SLO:
    """A spec latency SLO (``ttft_ms`` at p99 at most 2000 ms) as the benchmark judges it."""
    return SLO(
        metric=spec_slo.metric, statistic=f"p{spec_slo.percentile:g}", threshold=spec_slo.max_ms
    )


def dataset_config(workload: Workload, folder: Path) -> DatasetConfig:
    """The workload's dataset; file paths are resolved against the POC's folder."""
    data = workload.dataset
    if data.kind == "random":
        return DatasetConfig(kind="random", isl=data.isl, osl=data.osl, seed=workload.seed)
    if data.kind == "sharegpt":
        return DatasetConfig(
            kind="sharegpt", path=str(folder / data.path), osl=data.osl, seed=workload.seed
        )
    if data.kind == "shared_prefix":
        return DatasetConfig(
            kind="shared_prefix",
            isl=data.suffix_len,
            osl=data.osl,
            groups=data.groups,
            prefix_len=data.prefix_len,
            seed=workload.seed,
        )
    if data.kind == "multi_turn":
        return DatasetConfig(
            kind="multi_turn",
            users=data.users,
            turns=data.turns,
            system_prompt_len=data.system_prompt_len,
            isl=data.question_len,
            answer_len=data.answer_len,
            osl=data.osl,
            seed=workload.seed,
        )
    if data.kind == "doc_qa":
        return DatasetConfig(
            kind="doc_qa",
            users=data.documents,
            turns=data.questions,
            system_prompt_len=data.doc_len,
            isl=data.question_len,
            osl=data.osl,
            seed=workload.seed,
        )
    return DatasetConfig(kind="trace", path=str(folder / data.path), seed=workload.seed)


def sweep_config(spec: PocSpec, workload: Workload, base_url: str, tokenizer: str) -> SweepConfig:
    """The load generator's configuration for one workload of the spec.

    ``tokenizer``: the served model's folder; used when it holds a ``tokenizer.json``.
    """
    data, load = workload.dataset, workload.load
    if data.kind == "trace":
        mode, values = "trace", [1.0 / data.time_scale]
    elif load.concurrency is not None:
        mode, values = "concurrency", [float(c) for c in load.concurrency]
    else:
        mode, values = "rate", list(load.request_rate)
    return SweepConfig(
        base_url=base_url,
        model=spec.model.served_name or spec.model.id,
        api=workload.api,
        tokenizer=tokenizer if (Path(tokenizer) / "tokenizer.json").is_file() else None,
        dataset=dataset_config(workload, spec.source_dir or Path.cwd()),
        mode=mode,
        values=values,
        num_prompts=workload.num_prompts,
        duration_s=workload.duration_s,
        repeats=workload.repeats,
        profile_requests=workload.profile.requests if workload.profile else None,
        warmup=workload.warmup,
        burstiness=load.burstiness if load.arrival == "gamma" else 1.0,
        max_concurrency=load.max_concurrency,
        slos=[slo(s) for s in workload.slos],
        ignore_eos=workload.ignore_eos,
        gpus=spec.cluster.total_gpus,
        seed=workload.seed,
    )
