"""serve.yml / train.yml from a POC spec: the kit's own verbs, run on the nodes.

- serve: every node starts its rank with ``pocforge launch <poc.yaml> --node-rank N`` (in
  the background, a pid file per node); the playbook waits until each rank with an HTTP
  endpoint answers its plan's health URL, then the first node runs one
  ``pocforge bench serve`` sweep per workload of the spec against rank 0's endpoint;
- train: every node runs ``pocforge bench train <poc.yaml> --node-rank N`` (its own ranks,
  DeepSpeed's launcher with ``--no_ssh``) to completion; rank 0 writes the summary.

``run_workload`` chains the playbook, collect.yml (the nodes' run folders into
``<run>/cluster/collected/<host>/``) and teardown.yml (always), and adopts what the kit
wrote on the nodes as the run's ``serving/<workload>/`` or ``training/`` stage, so the
dashboard reads a cluster run as it reads a local one. The POC folder and the kit must be
at the same paths on the nodes (a shared file system or the same checkout).
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from pocforge.cluster.events import ClusterResult

# Where the nodes run the kit's verbs (the workload role's workdir); collected per host.
WORKDIR = "/opt/pocforge/run"


def bench_serve_argv(cfg: Any, pocforge: str, out: str) -> list[str]:
    """``pocforge bench serve`` with the options of a ``SweepConfig`` (bench.from_spec)."""
    from pocforge.bench.datasets import format_length

    data = cfg.dataset
    argv = [pocforge, "bench", "serve", "--base-url", cfg.base_url, "--model", cfg.model]
    argv += ["--api", cfg.api, "--dataset", data.kind, "--seed", str(cfg.seed)]
    if cfg.tokenizer:
        argv += ["--tokenizer", cfg.tokenizer]
    if data.path:
        argv += ["--dataset-path", data.path]
    if data.kind != "trace":
        argv += ["--isl", format_length(data.isl)]
    if data.osl is not None:
        argv += ["--osl", format_length(data.osl)]
    if data.kind == "shared_prefix":
        argv += ["--prefix-len", str(data.prefix_len), "--groups", str(data.groups)]
    values = ",".join(f"{v:g}" for v in cfg.values)
    flag = {"concurrency": "--concurrency", "rate": "--rate", "trace": "--trace-speed"}[cfg.mode]
    argv += [flag, values]
    if cfg.duration_s is not None:
        argv += ["--duration", f"{cfg.duration_s:g}"]
    elif cfg.num_prompts is not None:
        argv += ["--num-prompts", str(cfg.num_prompts)]
    argv += ["--repeats", str(cfg.repeats), "--warmup", str(cfg.warmup)]
    argv += ["--burstiness", f"{cfg.burstiness:g}", "--gpus", str(cfg.gpus)]
    if cfg.max_concurrency is not None:
        argv += ["--max-concurrency", str(cfg.max_concurrency)]
    for slo in cfg.slos:
        argv += ["--slo", str(slo)]
    argv += ["--ignore-eos" if cfg.ignore_eos else "--no-ignore-eos"]
    argv += ["--timeout", f"{cfg.timeout_s:g}", "--quiet", "--out", out]
    return argv


def workload_vars(
    spec: Any,
    kind: str,
    *,
    pocforge: str = "pocforge",
    env: dict | None = None,
    benchmark_on_node: bool = True,
) -> dict:
    """Extra vars of the workload role for ``spec`` (``kind``: serve or train).

    ``benchmark_on_node``: serve also runs the benchmark from the first node (``pocforge run``
    benchmarks from the controller instead and passes False)."""
    from pocforge.bench.from_spec import sweep_config
    from pocforge.frameworks import ADAPTERS, LaunchContext
    from pocforge.frameworks.base import model_path, prepare_model
    from pocforge.frameworks.startup import startup_timeout_s, training_timeout_s
    from pocforge.paths import workspace_root

    poc = str(Path(spec.source_file).resolve())
    out: dict[str, Any] = {"workload_kind": kind, "workload_env": dict(env or {})}
    if kind == "serve":
        if spec.serving is None:
            raise ValueError(f"{spec.name} has no serving section")
        if spec.model.tiny is not None:
            prepare_model(spec)  # the kit's tiny test model: its tokenizer feeds the benchmark
        launches = ADAPTERS[spec.serving.framework].plan(spec, LaunchContext(repo=workspace_root()))
        urls = {str(one.node_rank): one.health_url for one in launches if one.health_url}
        # the entry node: the first launch that answers HTTP (a Ray layout starts its head first)
        base = next(one.health_url for one in launches if one.health_url).rsplit("/", 1)[0]
        # Jinja, resolved per host by Ansible: each node starts its own rank.
        out["workload_command"] = (
            f"{shlex.quote(pocforge)} launch {shlex.quote(poc)} --node-rank "
            "{{ workload_node_rank }}"
        )
        out["workload_health_urls"] = urls
        # the launcher's own deadline first, so the playbook reads its failure line
        out["workload_health_timeout_s"] = int(startup_timeout_s(spec)) + 120
        out["workload_benchmark_commands"] = [
            bench_serve_argv(
                sweep_config(spec, w, base, model_path(spec)), pocforge, f"bench/{w.name}"
            )
            for w in spec.serving.workloads
            if benchmark_on_node
        ]
    elif kind == "train":
        if spec.training is None:
            raise ValueError(f"{spec.name} has no training section")
        out["workload_command"] = (
            f"{shlex.quote(pocforge)} bench train {shlex.quote(poc)} --node-rank "
            "{{ workload_node_rank }}"
        )
        out["workload_train_timeout_s"] = int(training_timeout_s(spec)) + 120
    else:
        raise ValueError(f"unknown workload kind {kind!r} (serve or train)")
    return out


def run_workload(
    run: Any,
    spec: Any,
    kind: str,
    inventory: Path,
    *,
    pocforge: str = "pocforge",
    env: dict | None = None,
    extravars: dict | None = None,
    limit: str | None = None,
    on_change: Any = None,
) -> dict[str, ClusterResult]:
    """serve.yml or train.yml, then collect.yml and teardown.yml (also after a failure),
    as stages of ``run``; returns each playbook's result by name."""
    from pocforge.cluster.driver import PLAYBOOKS, run_playbook_stage

    variables = {**workload_vars(spec, kind, pocforge=pocforge, env=env), **(extravars or {})}
    collected = run.path / "cluster" / "collected"
    options = {"limit": limit, "on_change": on_change}
    results: dict[str, ClusterResult] = {}
    try:
        results[kind] = run_playbook_stage(
            run, PLAYBOOKS[kind], inventory, extravars=variables, **options
        )
    finally:
        try:
            collect = {**(extravars or {}), "collect_dest": str(collected)}
            results["collect"] = run_playbook_stage(
                run, PLAYBOOKS["collect"], inventory, extravars=collect, **options
            )
        finally:
            results["down"] = run_playbook_stage(
                run, PLAYBOOKS["down"], inventory, extravars=extravars, **options
            )
    _adopt_outputs(run, spec, kind, collected)
    return results


def _adopt_outputs(run: Any, spec: Any, kind: str, collected: Path) -> None:
    """The kit's files from the first node that wrote them, as the run's own stage."""
    nodes = sorted(p for p in collected.iterdir() if p.is_dir()) if collected.is_dir() else []
    workdir = WORKDIR.strip("/")
    if kind == "serve":
        for node in nodes:
            bench = node / workdir / "bench"
            if bench.is_dir():
                with run.stage("serving") as stage:
                    for workload in sorted(p for p in bench.iterdir() if p.is_dir()):
                        stage.add_tree(workload, workload.name)
                return
    else:
        for node in nodes:
            found = sorted((node / workdir / "results" / spec.name).glob("*/training"))
            if found:
                with run.stage("training") as stage:
                    stage.add_tree(found[-1])
                return
