"""From POC to product: every patch the POCs carry, what it is for, where it stands upstream,
the runs it was proven in, and how it fares on the newest release checked.

A patch's header says its reason and its way to product
(:mod:`pocforge.frameworks.patching.files`); the runs' provenance says which runs carried
it, byte for byte (its SHA-256), on which framework version and nodes, and how they ended;
``pocforge patch status`` keeps its judgments per release checked. ``pocforge patch report``
writes them as one markdown table; a run's dashboard shows its own POC's patches
(:func:`section`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pocforge.frameworks.patching import PatchFile, discover
from pocforge.frameworks.patching.against import LABELS, newest_checked
from pocforge.report.sections import Section
from pocforge.results.run_schema import PatchInfo
from pocforge.results.store import Run, RunError, RunStore
from pocforge.spec import SpecError, load_spec


@dataclass
class Proven:
    run: str
    version: str  # the framework version the run declared (validate holds it to the nodes')
    hosts: list[str]
    status: str  # the run's: complete, failed, interrupted


@dataclass
class PatchRow:
    poc: str
    customer: str
    patch: str  # "vllm/0001-x.patch"
    framework: str
    pinned: str
    reason: str
    serves: str | None = None
    upstream: str | None = None
    state: str | None = None
    owner: str | None = None
    proven: list[Proven] = field(default_factory=list)
    newest: dict | None = None  # the judgment on the newest release checked


def _version(spec: dict, framework: str) -> str:
    for section in ("serving", "training"):
        part = spec.get(section) or {}
        if part.get("framework") == framework and part.get("version"):
            return str(part["version"])
    return "?"


def carried(store: RunStore, poc: str) -> list[tuple[set[str], Run]]:
    """Each run of ``poc`` with the SHA-256 of every patch file it carried (its
    provenance), read once for all of the POC's patches."""
    found = []
    for folder in store.runs(poc):
        try:
            run = Run.open(folder)
        except RunError:
            continue  # a folder that is not a run: nothing it proves
        provenance = run.provenance()
        if provenance is not None:
            found.append(({one.sha256 for one in provenance.patches}, run))
    return found


def proven(runs: list[tuple[set[str], Run]], sha256: str, framework: str) -> list[Proven]:
    """The runs that carried this exact patch."""
    return [
        Proven(
            run=run.id,
            version=_version(run.manifest.spec or {}, framework),
            hosts=list(run.manifest.hosts),
            status=run.manifest.status,
        )
        for shas, run in runs
        if sha256 in shas
    ]


def rows(pocs: Path, results: Path, checked: Path) -> list[PatchRow]:
    """Every patch of every POC under ``pocs``, in POC and patch order."""
    store = RunStore(results)
    found = []
    for poc_yaml in sorted(pocs.glob("*/poc.yaml")):
        if not (poc_yaml.parent / "patches").is_dir():
            continue
        try:
            spec = load_spec(poc_yaml)
        except SpecError:
            continue  # validate names it; the report lists the POCs that load
        newest = newest_checked(spec.name, checked)
        runs = carried(store, spec.name)
        for patches in discover(poc_yaml.parent / "patches").values():
            found += [
                _row(spec, patch, proven(runs, patch.sha256, patch.framework), newest)
                for patch in patches
            ]
    return found


def _row(spec, patch: PatchFile, proven_in: list[Proven], newest: dict[str, dict]) -> PatchRow:
    return PatchRow(
        poc=spec.name,
        customer=spec.poc.customer,
        patch=patch.name,
        framework=patch.framework,
        pinned=patch.version,
        reason=" ".join(patch.description.split()),
        serves=patch.said("serves"),
        upstream=patch.said("upstream"),
        state=patch.said("state"),
        owner=patch.said("owner"),
        proven=proven_in,
        newest=newest.get(patch.name),
    )


def _proven_text(row: PatchRow) -> str:
    if not row.proven:
        return "no run yet"
    by_version: dict[str, list[Proven]] = {}
    for one in row.proven:
        by_version.setdefault(one.version, []).append(one)
    return "; ".join(
        f"{row.framework} {version}: {len(runs)} run(s), "
        f"{sum(r.status == 'complete' for r in runs)} complete, last {runs[-1].run} "
        f"on {', '.join(runs[-1].hosts) or 'this machine'}"
        for version, runs in by_version.items()
    )


def _newest_text(row: PatchRow) -> str:
    if row.newest is None:
        return "not checked (`pocforge patch status POC --against latest`)"
    said = f"{LABELS[row.newest['verdict']]} on {row.framework} {row.newest['release']}"
    detail = row.newest.get("detail")
    return f"{said} ({detail})" if detail else said


def markdown(found: list[PatchRow]) -> str:
    """The report for the planning meeting: one row per patch, grouped by framework."""
    head = [
        "# Patches from POC to product",
        "",
        "| patch | POC | customer | why | serves | upstream | state | owner | proven on | "
        "newest release checked |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    body = [
        "| "
        + " | ".join(
            cell.replace("|", "\\|")
            for cell in (
                f"{row.patch} (pinned {row.pinned})",
                row.poc,
                row.customer,
                row.reason,
                row.serves or "not said",
                row.upstream or "not said",
                row.state or "not said",
                row.owner or "not said",
                _proven_text(row),
                _newest_text(row),
            )
        )
        + " |"
        for row in sorted(found, key=lambda r: (r.framework, r.patch, r.poc))
    ]
    if not found:
        body = ["", "No POC carries a patch."]
    return "\n".join(head + body) + "\n"


def section(carried: list[PatchInfo], _: Callable[[str], str]) -> Section | None:
    """A run's dashboard section: the patches it ran with, each with its way to product."""
    patches = [one for one in carried if one.framework is not None]
    if not patches:
        return None
    return Section("patches", _("Patches: from POC to product"), body={"patches": patches})
