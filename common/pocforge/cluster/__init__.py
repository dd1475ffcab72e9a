"""Cluster bring-up and acceptance: Ansible playbooks driven through ansible-runner.

``run_playbook`` runs one of ``playbooks/*.yml`` against an inventory with the POC's
expectations and returns a ``ClusterResult`` (per-host status, per-check records, facts);
``inventory_from_spec`` and ``expectations_from_spec`` derive both from a POC spec.
``run_playbook_stage`` runs a playbook as a stage of a results-store run and writes the documents the
dashboard reads (``cluster/health.json``, ``collectives/*.json``, hosts in provenance).
"""

from pocforge.cluster.driver import (
    PLAYBOOKS,
    ClusterError,
    playbooks_dir,
    run_playbook,
    run_playbook_stage,
)
from pocforge.cluster.events import CheckRecord, ClusterResult, HostResult
from pocforge.cluster.expectations import ClusterExpectations
from pocforge.cluster.inventory import expectations_from_spec, inventory_from_spec
from pocforge.cluster.references import collective_references

__all__ = [
    "PLAYBOOKS",
    "CheckRecord",
    "ClusterError",
    "ClusterExpectations",
    "ClusterResult",
    "HostResult",
    "collective_references",
    "expectations_from_spec",
    "inventory_from_spec",
    "playbooks_dir",
    "run_playbook_stage",
    "run_playbook",
]
