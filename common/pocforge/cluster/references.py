"""The per-platform busbw reference table (``data/collectives_reference.yaml``)."""

from __future__ import annotations

from functools import cache
from importlib import resources

import yaml


@cache
def _table() -> dict:
    text = resources.files("pocforge.cluster").joinpath("data/collectives_reference.yaml")
    return yaml.safe_load(text.read_text()) or {}


def collective_references(gpu: str, scale_out: str | None) -> dict:
    """``{"intra_node": {op: GB/s}, "inter_node": {op: GB/s}}`` for this platform.

    Missing platforms, fabrics or collectives are simply absent: the playbook then reports
    the busbw check as skipped ("no busbw reference"), never as passed.
    """
    platform = _table().get(gpu) or {}

    def flat(scope: dict | None) -> dict:
        return {op: float(entry["busbw_gbs"]) for op, entry in (scope or {}).items()}

    return {
        "intra_node": flat(platform.get("intra_node")),
        "inter_node": flat(platform.get(scale_out)) if scale_out else {},
    }


def spec_references(spec: dict | None) -> dict:
    """:func:`collective_references` for a resolved spec as a run stores it (``manifest.spec``):
    the same lookup the cluster stage's expectations make from the spec."""
    cluster = (spec or {}).get("cluster") or {}
    scale_out = (cluster.get("interconnect") or {}).get("scale_out")
    return collective_references(str(cluster.get("gpu") or ""), scale_out)
