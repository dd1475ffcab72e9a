"""Profiled sweep points on a cluster (``serving.workloads[].profile``): the servers'
profilers write on their nodes, so the points' files are kept there and brought home.

- Around a profiled point's pass the hook starts and stops the framework's profiler through
  the entry server's API, as a run here does; the profiler of every engine behind it (a DP
  rank on another node too) writes on its own node, in ``PROFILE_DIR``.
- After the point, ``profile.yml`` runs on the serving nodes: the kit's process manager
  (``profilers.py settle``) waits until the files are whole (vLLM: each worker's
  table beside its trace) and moves them into the point's own folder on the node
  (``<run folder>/profiles/<workload>/profile-<point>/``), out of the way of the next
  profiled point's, whose vLLM table has the same name.
- collect.yml fetches the run folder; :func:`adopt_profiles` then links each node's files
  into ``serving/<workload>/profile-<point>/<host>/``, where the dashboard shows them.

A profile is extra: a profiler that does not start or stop, or a node that does not
answer the move, is a line, never a failed point.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from pocforge.bench.summary import PointSummary
from pocforge.cluster.driver import PLAYBOOKS, ClusterError, run_playbook
from pocforge.cluster.workload import WORKDIR
from pocforge.frameworks.base import PROFILE_DIR
from pocforge.frameworks.profilers import ROCPROF_SUBDIR
from pocforge.report.profiles import PREFIX
from pocforge.runner.profile import SETTLE_S, ProfileHook

Say = Callable[[str], None]
NODE_PROFILES = f"{WORKDIR}/profiles"  # on a node: <workload>/profile-<point>/


def node_folder(workload: str, point: str) -> str:
    """A profiled point's folder on a node."""
    return f"{NODE_PROFILES}/{workload}/{PREFIX}{point}"


class NodeProfileHook(ProfileHook):
    """:class:`ProfileHook` for servers on a cluster's nodes: ``run`` and ``nodes`` (the
    runner's) run profile.yml after each profiled point."""

    def __init__(
        self,
        base_url: str,
        framework: str,
        points: list[str],
        workload: str,
        run,
        nodes,
        say: Say = print,
        tool: str = "torch",
    ):
        super().__init__(base_url, framework, points, Path(PROFILE_DIR), Path(), say, tool=tool)
        self.workload, self.run, self.nodes = workload, run, nodes
        self._since = 0.0

    def _start(self, point: PointSummary) -> None:
        if point.id not in self.points:
            return
        self._since = time.time()  # the nodes read their logs from here for a failed stop
        self._post("/start_profile", self.profiler.start_body(self.framework, PROFILE_DIR))
        self.say(
            f"profile: {point.id} under {self.profiler.describe(self.framework)}, on the nodes"
        )

    def after_profile(self, point: PointSummary, interrupted: bool) -> None:
        if not self._stop(point, interrupted):
            return
        if self.profiler.at_exit:  # written at the servers' exit: collect.yml stops them
            self.say(
                f"profile: {point.id}: {self.profiler.name} writes its files when the servers stop"
            )
            return
        variables = {
            "profile_src": PROFILE_DIR,
            "profile_dest": node_folder(self.workload, point.id),
            "profile_framework": self.framework,
            "profile_tool": self.profiler.name,
            "profile_settle_s": int(SETTLE_S),
            "profile_workdir": WORKDIR,
            "profile_since": int(self._since),
            **self.nodes.extravars,
        }
        try:
            result = run_playbook(
                PLAYBOOKS["profile"],
                self.nodes.inventory,
                self.run.path,
                extravars=variables,
                limit=self.nodes.limit,
            )
        except (ClusterError, OSError, RuntimeError) as exc:  # extra: the sweep goes on
            self.say(f"profile: {point.id}: the nodes' files were not kept: {exc}")
            return
        for name, host in sorted(result.hosts.items()):
            moved = host.outputs.get("profile_moved")
            if host.status != "ok" or not isinstance(moved, dict):
                self.say(f"profile: {point.id}: {name}: not kept ({host.error or host.status})")
                continue
            missing = moved.get("missing_tables") or []
            failed = moved.get("failed") or []
            note = f"; no table from {missing}" if missing else ""
            note += f": {failed[0]}" if missing and failed else ""
            earlier = moved.get("set_aside") or 0
            note += f"; {earlier} files of an earlier attempt set aside" if earlier else ""
            self.say(f"profile: {point.id}: {name}: {moved.get('moved', 0)} files kept{note}")
            for problem in moved.get("problems") or []:
                self.say(f"profile: {point.id}: {name}: no kernel table: {problem}")


def adopt_profiles(
    run, collected: Path, workloads: list[str], say: Say, rocprof: tuple[str, str] | None = None
) -> None:
    """Each node's profiled points among the collected files (``<collected>/<host>/<its
    path>``) linked into ``serving/<workload>/profile-<point>/<host>/`` and recorded in
    the run (a hard link: the collected copy stays whole, nothing is stored twice).
    ``rocprof``: the (workload, point) rocprofv3 profiled, whose files it wrote at the
    servers' exit into ``PROFILE_DIR/rocprofv3/``."""
    hosts = sorted(p for p in collected.iterdir() if p.is_dir()) if collected.is_dir() else []
    for workload in workloads:
        kept = 0
        for host in hosts:
            base = host / NODE_PROFILES.lstrip("/") / workload
            folders = (
                [(f, f.name) for f in sorted(base.glob(f"{PREFIX}*"))] if base.is_dir() else []
            )
            if rocprof is not None and rocprof[0] == workload:
                exited = host / PROFILE_DIR.lstrip("/") / ROCPROF_SUBDIR
                folders += [(exited, f"{PREFIX}{rocprof[1]}")] if exited.is_dir() else []
            for folder, name in folders:
                dest = run.path / "serving" / workload / name / host.name
                if folder.name == ROCPROF_SUBDIR:
                    dest = dest / ROCPROF_SUBDIR
                for path in sorted(p for p in folder.rglob("*") if p.is_file()):
                    target = dest / path.relative_to(folder)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    if not target.exists():  # adopted by an earlier call
                        _link(path, target)
                    kept += 1
        if kept:
            run.adopt(Path("serving") / workload, stage="serving")
            say(f"profile: {workload}: {kept} files from the nodes in serving/{workload}/")


def _link(src: Path, dest: Path) -> None:
    try:
        os.link(src, dest)
    except OSError:
        shutil.copy2(src, dest)  # another filesystem
