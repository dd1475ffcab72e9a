"""Which pytest-xdist worker runs which test (``make test`` runs two, one per core).

The tests of a file that use a module fixture run in one worker, so it is set up once (the
file's other tests go wherever a worker is free); tests that read the same session fixture
of the suite's expensive real things (:data:`SHARED_FIXTURES`), or that share a resource of
this machine (``@pytest.mark.shares``: the namespaced subnet, podman's containers), run in
one worker, one after the other, so each such thing is started once per suite. The groups
that hold the integration tests go first, the shared resources' chain at the head, so the
short tests fill the other worker around them.

Why not pytest-xdist's own ``--dist loadgroup``: it tags a test by rewriting
``item._nodeid``, which pytest 9.2 no longer reads (a node's id is built from ``_id``), so
every ``xdist_group`` is silently ignored. Here each worker writes the groups it computed
from its collection to a file the controller's scheduler reads (the controller collects
nothing itself)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

# The session's expensive real things (tests/conftest.py, tests/integration/conftest.py).
SHARED_FIXTURES = ("vllm_server", "sglang_llama", "zero_runs")
GROUPS_ENV = "POCFORGE_TEST_GROUPS"


def _unit(item) -> str:
    """The item's own scope: its file when it uses a fixture set up once per module (or
    class, or package), else the test alone."""
    defs = item._fixtureinfo.name2fixturedefs.values()
    if any(d[-1].scope in ("module", "class", "package") for d in defs if d):
        return item.nodeid.split("::", 1)[0]
    return item.nodeid


def configure(config) -> None:
    """On the controller of a distributed run: where the workers write their groups."""
    if hasattr(config, "workerinput") or config.getoption("numprocesses", None) in (None, 0):
        return
    folder = Path(tempfile.mkdtemp(prefix="pocforge-test-groups-"))
    os.environ[GROUPS_ENV] = str(folder / "groups.json")


def unconfigure(config) -> None:
    """On the controller: the groups' folder goes with the run."""
    out = os.environ.get(GROUPS_ENV)
    if out and not hasattr(config, "workerinput"):
        shutil.rmtree(Path(out).parent, ignore_errors=True)
        del os.environ[GROUPS_ENV]


def _weight(item) -> int:
    """0: a shared resource's chain, 1: integration, 2: the rest (the order groups start in)."""
    if item.get_closest_marker("shares"):
        return 0
    return 1 if item.get_closest_marker("integration") else 2


def assign(config, items) -> None:
    """In a worker: group the tests (the union of their units that share a fixture or a
    resource), put the heavy groups first, and write ``{nodeid: group}`` for the
    controller's scheduler."""
    out = os.environ.get(GROUPS_ENV)
    if not hasattr(config, "workerinput") or not out:
        return
    parent: dict[str, str] = {}

    def find(key: str) -> str:
        while parent.setdefault(key, key) != key:
            key = parent[key]
        return key

    units = {item.nodeid: _unit(item) for item in items}
    for item in items:
        shared = [f"fixture:{n}" for n in SHARED_FIXTURES if n in item.fixturenames]
        shared += [f"resource:{mark.args[0]}" for mark in item.iter_markers("shares")]
        for name in shared:
            parent[find(units[item.nodeid])] = find(name)
    groups = {nodeid: find(unit) for nodeid, unit in units.items()}
    rank: dict[str, int] = {}
    for item in items:
        group = groups[item.nodeid]
        rank[group] = min(rank.get(group, 2), _weight(item))
    items.sort(key=lambda item: rank[groups[item.nodeid]])  # stable: files keep their order
    mine = Path(f"{out}.{config.workerinput['workerid']}")
    mine.write_text(json.dumps(groups))
    mine.replace(out)  # both workers write the same groups: whichever lands last is read


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own choice of scheduler
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadgroup" or not os.environ.get(GROUPS_ENV):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedThingsScheduling(LoadScopeScheduling):
        """xdist's scope scheduling, a scope being the group :func:`assign` wrote."""

        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:  # read once every worker has collected
                self.groups = json.loads(Path(os.environ[GROUPS_ENV]).read_text())
            return self.groups.get(nodeid) or nodeid.split("::", 1)[0]

    return SharedThingsScheduling(config, log)
