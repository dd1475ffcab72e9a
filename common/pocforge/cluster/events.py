"""ansible-runner events -> per-host results: status, check records, facts, changes.

One ``EventCollector`` is the ``event_handler`` of a run. It keeps, per host, the task it is
on (for the live view), the ``pocforge_check`` records the playbook produced, the facts the
probe roles set, and how the host ended (ok, failed, unreachable).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

# Facts the probe roles set (role-prefixed); kept for the report's provenance.
FACT_KEYS = (
    "host_facts_data",
    "gpu_stack_data",
    "rdma_nics_data",
    "python_env_data",
    "container_image_data",
    "profiler_tools_data",
    "model_staging_data",
    "preflight_pcie_data",
)
# Facts that carry a role's raw measurements (collectives: each nccl-tests run's stdout, and
# each expert-parallel benchmark's); kept on the host for the driver's result files, not in
# the facts saved for provenance.
# (profile: what profilers.py settle moved on the node)
OUTPUT_KEYS = ("collectives_runs", "collectives_ep_runs", "profile_moved")
SETUP_KEYS = (
    "hostname",
    "fqdn",
    "distribution",
    "distribution_version",
    "kernel",
    "architecture",
    "processor_count",
    "processor_vcpus",
    "memtotal_mb",
    "default_ipv4",
)


@dataclass
class CheckRecord:
    """One host's verdict on one check. ``skip`` is a first-class outcome: the check could
    not run or does not apply there, and ``reason`` says why ("not root", "nvidia-smi not
    found", "no busbw reference for ..."); ``message`` reads ``<check>: skipped: <reason>``."""

    host: str
    check: str
    status: str  # pass | fail | skip
    measured: Any = None
    threshold: Any = None
    message: str = ""
    unit: str = ""
    reason: str = ""


@dataclass
class HostResult:
    host: str
    status: str = "running"  # running | ok | failed | unreachable
    task: str = ""
    ok: int = 0
    changed: int = 0
    failed: int = 0
    changed_tasks: list[str] = field(default_factory=list)
    error: str = ""
    checks: dict[str, CheckRecord] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)


@dataclass
class ClusterResult:
    playbook: str
    hosts: dict[str, HostResult] = field(default_factory=dict)
    rc: int | None = None
    status: str = ""
    artifacts: str = ""

    @property
    def passed(self) -> bool:
        return (
            bool(self.hosts)
            and all(h.status == "ok" for h in self.hosts.values())
            and not any(c.status == "fail" for h in self.hosts.values() for c in h.checks.values())
        )

    def failures(self) -> list[CheckRecord]:
        return [c for h in self.hosts.values() for c in h.checks.values() if c.status == "fail"]

    def skipped(self) -> list[CheckRecord]:
        """The checks that did not run, each with its reason (to list next to the failures)."""
        return [c for h in self.hosts.values() for c in h.checks.values() if c.status == "skip"]

    def to_dict(self) -> dict:
        return {
            "playbook": self.playbook,
            "rc": self.rc,
            "status": self.status,
            "passed": self.passed,
            "hosts": {
                n: {k: v for k, v in asdict(h).items() if k != "outputs"}
                for n, h in self.hosts.items()
            },
        }


def _reason(rec: dict) -> str:
    """A skip's reason from its message, for records written before ``reason`` existed."""
    if rec.get("status") != "skip":
        return ""
    _, sep, reason = str(rec.get("message", "")).partition(": skipped: ")
    return reason if sep else ""


class EventCollector:
    """The ``event_handler`` for ansible-runner; ``on_change`` redraws a live view."""

    def __init__(self, playbook: str, on_change: Callable[[ClusterResult], None] | None = None):
        self.result = ClusterResult(playbook=playbook)
        self._on_change = on_change

    def host(self, name: str) -> HostResult:
        return self.result.hosts.setdefault(name, HostResult(host=name))

    def __call__(self, event: dict) -> bool:
        kind = event.get("event", "")
        data = event.get("event_data") or {}
        name = data.get("host") or data.get("remote_addr")
        if kind == "runner_on_start" and name:
            self.host(name).task = data.get("task", "")
        elif kind in ("runner_on_ok", "runner_on_failed", "runner_on_unreachable") and name:
            self._result(kind, name, data)
        elif kind == "playbook_on_stats":
            self._stats(data)
        else:
            return True
        if self._on_change:
            self._on_change(self.result)
        return True

    def _result(self, kind: str, name: str, data: dict) -> None:
        host = self.host(name)
        res = data.get("res") or {}
        task = data.get("task", "")
        records = res.get("pocforge_checks") or []
        for rec in records:
            host.checks[rec["check"]] = CheckRecord(
                host=name,
                check=rec["check"],
                status=rec["status"],
                measured=rec.get("measured"),
                threshold=rec.get("expected", rec.get("threshold")),
                message=rec.get("message", ""),
                unit=rec.get("unit") or "",
                reason=rec.get("reason") or _reason(rec),
            )
        facts = res.get("ansible_facts") or {}
        for key in FACT_KEYS:
            if key in facts:
                host.facts[key] = facts[key]
        for key in OUTPUT_KEYS:
            if key in facts:
                host.outputs[key] = facts[key]
        if any(k.startswith("ansible_") for k in facts):
            host.facts["ansible"] = {k: facts.get(f"ansible_{k}") for k in SETUP_KEYS}
        for item in res.get("results") or []:  # loops: facts and checks per item
            for key in FACT_KEYS:
                if key in (item.get("ansible_facts") or {}):
                    host.facts[key] = item["ansible_facts"][key]
        if kind == "runner_on_unreachable":
            host.status = "unreachable"
            # a looped task's own msg is "All items completed": the items say why
            reasons = [
                str(item.get("msg")).strip()
                for item in res.get("results") or []
                if isinstance(item, dict) and item.get("unreachable") and item.get("msg")
            ]
            host.error = reasons[0] if reasons else str(res.get("msg", "unreachable")).strip()
            host.checks["reachable"] = CheckRecord(
                host=name,
                check="reachable",
                status="fail",
                measured="unreachable",
                threshold="reachable over SSH",
                message=f"reachable: {host.error}",
            )
        elif kind == "runner_on_failed" and not data.get("ignore_errors"):
            host.failed += 1
            host.status = "failed"
            msg = str(res.get("msg") or res.get("stderr") or "failed").strip()
            # a loop fails with "One or more items failed": the failed items say what
            failed_items = [
                str(item.get("msg") or item.get("stderr") or "").strip()
                for item in res.get("results") or []
                if isinstance(item, dict) and item.get("failed")
            ]
            if any(failed_items):
                msg = "; ".join(m for m in failed_items if m)
            if not task.startswith("Verdict"):
                # a task that is not a check broke: it is a failed check of its own
                key = f"task: {task}"
                host.checks[key] = CheckRecord(
                    host=name,
                    check=key,
                    status="fail",
                    measured=msg.splitlines()[-1][:300] if msg else "",
                    message=f"{task}: {msg}",
                )
            host.error = msg
        else:
            host.ok += 1
            if res.get("changed"):
                host.changed += 1
                host.changed_tasks.append(task)

    def _stats(self, data: dict) -> None:
        for name in (
            set(data.get("ok", {})) | set(data.get("failures", {})) | set(data.get("dark", {}))
        ):
            host = self.host(name)
            if name in data.get("dark", {}):
                host.status = "unreachable"
            elif name in data.get("failures", {}):
                host.status = "failed"
            elif host.status == "running":
                host.status = "ok"
