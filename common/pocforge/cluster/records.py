"""A playbook's per-host results as the results store's documents.

- ``cluster/health.json`` (``ClusterHealth``): one cell per host and check, merged across
  the playbooks of a run (preflight, then collectives: the later record of a cell wins);
- ``collectives/<host>-<op>-intra_node.json`` and ``collectives/<op>-inter_node.json``
  (``CollectiveResult``): every collective run's table per message size, parsed from the
  raw output the collectives role kept, with the raw text beside it under ``raw/``, and
  the platform's reference busbw for its op and scope, so ``pct_reference`` can be judged
  from the run folder alone;
- ``collectives/ep_alltoall-<benchmark>-<host>.json`` (``EpAllToAllResult``): each node's
  output of each expert-parallel benchmark (DeepEP's tests), its raw text under ``raw/``;
- ``provenance.json`` gains one ``HostFacts`` (source ``ansible``) per host that reported.
"""

from __future__ import annotations

import json
from typing import Any

from pocforge.cluster.events import CheckRecord, ClusterResult
from pocforge.cluster.references import spec_references
from pocforge.results.base import SchemaError
from pocforge.results.ep_schema import EpAllToAllResult
from pocforge.results.importers import deepep
from pocforge.results.importers.common import ResultImportError
from pocforge.results.importers.nccl_tests import parse_text
from pocforge.results.provenance import now
from pocforge.results.run_schema import GpuInfo, HostFacts
from pocforge.results.schema import load_document
from pocforge.results.stage_schema import ClusterHealth, CollectiveResult, HealthCheck
from pocforge.results.store import PROVENANCE, Run, Stage

HEALTH = "cluster/health.json"


# The packages of a node's framework environments that provenance names (all of pip list
# would bury them).
_REPORTED_PACKAGES = {
    "torch",
    "vllm",
    "sglang",
    "deepspeed",
    "megatron-core",
    "transformers",
    "triton",
    "pytorch-triton-rocm",
    "pocforge",
    "pocforge-kernels",
    "flash-attn",
    "aiter",
}


def _show(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (list, tuple)):
        return ", ".join(_show(v) for v in value)
    return str(value)


def health_check(rec: CheckRecord) -> HealthCheck:
    value = None if rec.measured is None else _show(rec.measured)
    if value is not None and rec.unit:
        value = f"{value} {rec.unit}"
    if rec.status == "skip" and getattr(rec, "reason", ""):
        value = f"skipped: {rec.reason}"  # shown in the cell: why the check could not run
    return HealthCheck(
        host=rec.host, check=rec.check, status=rec.status, value=value, detail=rec.message or None
    )


def write_health(run: Run, result: ClusterResult, stage: str) -> ClusterHealth:
    """Merge ``result``'s host x check cells into the run's ``cluster/health.json``."""
    cells: dict[tuple[str, str], HealthCheck] = {}
    if (run.path / HEALTH).is_file():
        try:
            for cell in load_document(run.path / HEALTH, ClusterHealth).checks:
                cells[(cell.host, cell.check)] = cell
        except SchemaError:
            pass  # a damaged matrix is rebuilt from this playbook's records
    for host in result.hosts.values():
        for rec in host.checks.values():
            cells[(rec.host, rec.check)] = health_check(rec)
    health = ClusterHealth(checks=list(cells.values()))
    run.write_json(HEALTH, health, stage=stage)
    return health


def collective_name(host: str, run: dict) -> str:
    """``h1-all_reduce-intra_node`` within a node; ``all_reduce-inter_node`` across nodes."""
    base = f"{run['op']}-{run['scope']}"
    return base if run["scope"] == "inter_node" else f"{host}-{base}"


def write_collectives(
    stage: Stage, result: ClusterResult, references: dict | None = None
) -> list[CollectiveResult]:
    """One ``CollectiveResult`` per run that printed a result table (failed runs are in the
    health matrix as ``<op>_<scope>_run``); the raw text is kept under ``raw/``.

    ``references`` (``{"intra_node": {op: GB/s}, "inter_node": {...}}``) is what the
    playbook compared against (``ClusterExpectations.collective_reference``); default: the
    reference table's entry for the run's spec, which is how the expectations are built."""
    if references is None:
        references = spec_references(stage.run.manifest.spec)
    written: list[CollectiveResult] = []
    seen: set[str] = set()
    for name, host in result.hosts.items():
        for run in host.outputs.get("collectives_runs") or []:
            key = collective_name(name, run)
            if key in seen:  # the run across nodes is reported by every node
                continue
            seen.add(key)
            text = run.get("stdout") or ""
            if run.get("rc") not in (0, None) or not text.strip():
                continue
            raw = f"raw/{key}.txt"
            try:
                parsed = parse_text(text, run["op"], f"collectives/{raw}")
            except ResultImportError:
                continue  # no table: the check "<op>_<scope>_busbw" already says so
            scope = run["scope"]
            parsed = parsed.model_copy(
                update={
                    "scope": scope,
                    "host": name if scope == "intra_node" else None,
                    "reference_busbw_gbs": (references.get(scope) or {}).get(run["op"]),
                }
            )
            stage.write_text(raw, text if text.endswith("\n") else text + "\n")
            stage.write_json(f"{key}.json", parsed)
            written.append(parsed)
    return written


def write_ep_alltoall(stage: Stage, result: ClusterResult) -> list[EpAllToAllResult]:
    """One ``EpAllToAllResult`` per node and expert-parallel run that printed a result
    (the role's ``collectives_ep_runs``), named for its benchmark and node; the raw text is
    kept under ``raw/``. A run across nodes prints on every node, each its own ranks, so each
    node's output is its own file (the judge takes the worst).

    A run that did not exit 0 is the role's failed check ``ep_<name>_run`` (added here when
    the role did not record it); a run that exited 0 without a result line DeepEP or MoRI
    prints becomes the failed check ``ep_<name>_result`` with the importer's one line. Both
    reach the health matrix (``write_health`` runs after this)."""
    written: list[EpAllToAllResult] = []
    files: set[str] = set()
    for name, host in result.hosts.items():
        for run in host.outputs.get("collectives_ep_runs") or []:
            label = str(run.get("name") or run.get("script") or "run")
            text = run.get("stdout") or ""
            rc = run.get("rc")
            if rc != 0:
                check = f"ep_{label}_run"
                ended = f"exited {rc}" if rc is not None else "ended without an exit status"
                if check not in host.checks:
                    host.checks[check] = CheckRecord(
                        host=name,
                        check=check,
                        status="fail",
                        measured="no exit status" if rc is None else rc,
                        threshold=0,
                        message=f"{check}: {run.get('script') or label} {ended}",
                    )
                continue
            raw = f"raw/ep_{label}-{name}.txt"
            stage.write_text(raw, text if text.endswith("\n") else text + "\n")
            try:
                parsed = deepep.parse_text(text, f"collectives/{raw}")
            except ResultImportError as exc:
                check = f"ep_{label}_result"
                host.checks[check] = CheckRecord(
                    host=name,
                    check=check,
                    status="fail",
                    measured="no result",
                    threshold="DeepEP / MoRI result lines",
                    message=f"{check}: {exc}",
                )
                continue
            parsed = parsed.model_copy(update={"host": name})
            file = parsed.collective  # two runs of one benchmark: the second named for its run
            file = f"{file}-{label}" if file in files else file
            files.add(file)
            stage.write_json(f"{file}.json", parsed)
            written.append(parsed)
    return written


def host_facts(name: str, facts: dict) -> HostFacts | None:
    """The probe roles' facts of one host as a provenance entry (None without a probe)."""
    host = facts.get("host_facts_data")
    if not host:
        return None
    gpu = facts.get("gpu_stack_data") or {}
    vendor = gpu.get("vendor") if gpu.get("vendor") in ("amd", "nvidia") else "other"
    models = gpu.get("models") or []
    bdfs = gpu.get("bdfs") or []
    gpus = [
        GpuInfo(
            index=i,
            name=str(models[i] if i < len(models) else (models[0] if models else "GPU")),
            vendor=vendor,
            driver=gpu.get("driver_version"),
            firmware=gpu.get("firmware_version"),
            pci_bus=bdfs[i] if i < len(bdfs) else None,
        )
        for i in range(int(gpu.get("count") or 0))
    ]
    stacks = {}
    if gpu.get("runtime"):
        stacks[str(gpu["runtime"])] = gpu.get("runtime_version")
    if gpu.get("kernel_module"):
        stacks[str(gpu["kernel_module"])] = gpu.get("driver_version")
    # every framework environment's packages, each named for its environment
    envs = (facts.get("python_env_data") or {}).get("envs") or {}
    packages = {
        f"{env}:{name}": version
        for env, listed in sorted(envs.items())
        for name, version in (listed or {}).items()
        if name in _REPORTED_PACKAGES
    }
    return HostFacts(
        hostname=f"{name} ({host.get('hostname')})" if host.get("hostname") != name else name,
        source="ansible",
        collected_at=now(),
        os=host.get("os"),
        kernel=host.get("kernel"),
        python=host.get("python"),
        cpu_model=host.get("cpu_model"),
        cpu_count=host.get("cpu_count"),
        memory_gb=host.get("mem_total_gb"),
        gpus=gpus,
        stacks=stacks,
        packages={str(k): (None if v is None else str(v)) for k, v in packages.items()},
    )


def write_provenance(run: Run, result: ClusterResult) -> None:
    """Add (or refresh) each reporting host's facts in the run's ``provenance.json``."""
    path = run.path / PROVENANCE
    if not path.is_file():
        return
    doc = json.loads(path.read_text(encoding="utf-8"))
    hosts = {h.get("hostname"): h for h in doc.get("hosts") or []}
    changed = False
    for name, host in result.hosts.items():
        entry = host_facts(name, host.facts)
        if entry is not None:
            hosts[entry.hostname] = entry.model_dump(mode="json")
            changed = True
    if changed:
        doc["hosts"] = list(hosts.values())
        run.write_json(PROVENANCE, doc)
