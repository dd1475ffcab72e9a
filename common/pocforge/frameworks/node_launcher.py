"""A node's launches, started as the controller planned them: in order, each ready before
the next (the prefill and decode instances together), kept up until stopped, or each run to
completion (a conversion, then the trainer).

The workload role copies this file to every node beside ``process.py``, ``launch_plan.py``
and ``profilers.py`` (all standard library) and runs it on the node's plan::

    python3 node_launcher.py serve serve.launches.json   # start in order, stay up until SIGTERM
    python3 node_launcher.py run train.launches.json     # run to completion, exit with its code

(A node's ``python3`` is the one Ansible already needs; the frameworks run in their own
runtime, a container or a venv, named in each launch's argv.) ``pocforge launch`` runs the
same code here.
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

if __package__:  # the kit's
    from pocforge.frameworks import profilers
    from pocforge.frameworks.launch_plan import WORKDIR, NodeLaunch, Role
    from pocforge.frameworks.process import LaunchError, ManagedProcess, StartFailed, poll_until
else:  # a script on a node: the workload role copies these beside it (found there also
    # under ``python3 -I``, which leaves the script's folder off sys.path)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import profilers
    from launch_plan import WORKDIR, NodeLaunch, Role
    from process import LaunchError, ManagedProcess, StartFailed, poll_until

# Roles a node starts first: what others connect to before what connects to it.
START_ORDER: tuple[Role, ...] = (
    "convert",  # a step run to completion before a trainer: what it writes, the trainer reads
    "ray-head",
    "ray-worker",
    "headless",
    "prefill",
    "decode",
    "server",
    "router",
    "launcher",
    "trainer",
)


Say = Callable[[str], None]


def in_start_order(launches: list[NodeLaunch]) -> list[NodeLaunch]:
    return sorted(launches, key=lambda one: START_ORDER.index(one.role))


# Roles whose launches on a node do not wait for one another: a disaggregated deployment's
# prefill and decode instances find each other only when requests come (the connector's
# handshake), so they load their weights at the same time; what follows (the router) waits
# for all of them.
TOGETHER: tuple[frozenset[Role], ...] = (frozenset({"prefill", "decode"}),)


def tiers(launches: list[NodeLaunch]) -> list[list[NodeLaunch]]:
    """``launches`` (in start order) in groups started together: a run of launches whose
    roles share a :data:`TOGETHER` set, else each alone."""
    groups: list[list[NodeLaunch]] = []
    for launch in launches:
        last = groups[-1][-1].role if groups else None
        if last is not None and any({last, launch.role} <= both for both in TOGETHER):
            groups[-1].append(launch)
        else:
            groups.append([launch])
    return groups


def start_node(
    name: str,
    launches: list[NodeLaunch],
    node_rank: int | None,
    timeout_s: float,
    say: Say,
    started: list[ManagedProcess],
    log_dir: Path,
    workdir: Path | None = None,
) -> None:
    """Start ``launches`` (POC ``name``) in order, all within ``timeout_s``: each ready
    before the next, except the prefill and decode instances, which start together and
    are all ready before the router (:func:`tiers`).

    Each process joins ``started`` the moment it runs, so the caller stops every one of
    them, also when a later one fails or Ctrl-C lands mid-start (with interrupts ignored
    by then, so a second Ctrl-C cannot cut the stop short)."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    rank = "" if node_rank is None else f"-rank{node_rank}"
    deadline = time.monotonic() + timeout_s
    for tier in tiers(launches):
        processes = []
        for launch in tier:
            role = "" if launch.role in ("server", "headless", "ray-worker") else f"-{launch.role}"
            role += "" if launch.instance is None else str(launch.instance)
            log = log_dir / f"{name}-{launch.framework}{rank}{role}-{stamp}.log"
            try:
                process = ManagedProcess(launch, log, workdir=workdir).start()
            except OSError as exc:
                raise StartFailed(
                    f"{name} node {launch.node_rank}: cannot start the {launch.role} "
                    f"({launch.argv[0]}): {exc.strerror or exc}; is it installed on this node?"
                ) from None
            started.append(process)
            processes.append(process)
            say(f"starting {process.what()} (pid {process.pid}); log: {log}")
        for process in processes:
            others = tuple(p for p in processes if p is not process)
            _wait_ready(name, process, max(deadline - time.monotonic(), 1.0), say, others)


def _wait_ready(
    name: str, process: ManagedProcess, timeout_s: float, say: Say, siblings: tuple = ()
) -> None:
    launch = process.launch
    if launch.health_url is not None:
        waited = process.wait_healthy(timeout_s, siblings=siblings)
        base = launch.health_url.rsplit("/", 1)[0]
        say(f"{name} is serving at {base}/v1 (healthy after {waited:.0f} s); Ctrl-C stops it")
    elif launch.role == "ray-head":
        port = flag_value(launch.argv, "--port")
        waited = _wait_listening(process, launch.host, int(port), timeout_s)
        say(f"ray head up at {launch.host}:{port} after {waited:.0f} s")
    else:  # a headless rank or a Ray worker: nothing to poll
        say(f"{name} node {launch.node_rank} ({launch.role}) started; Ctrl-C stops it")


def flag_value(argv: list[str], flag: str) -> str:
    """``--port=6379`` or ``--port 6379`` in ``argv``: what the process was told to use."""
    for index, arg in enumerate(argv):
        if arg.startswith(f"{flag}="):
            return arg.split("=", 1)[1]
        if arg == flag and index + 1 < len(argv):
            return argv[index + 1]
    raise ValueError(f"{flag} is not in {' '.join(argv)}")


def _wait_listening(process: ManagedProcess, host: str, port: int, timeout_s: float) -> float:
    """Poll until ``host:port`` accepts a TCP connection (a Ray head's GCS); seconds waited."""

    def listening() -> bool:
        try:
            with socket.create_connection((host, port), timeout=2):
                return True
        except OSError:
            return False

    failure = f"{process.launch.role} not listening on {host}:{port}"
    return poll_until(process, listening, timeout_s, 0.5, failure)


def ignore_interrupts() -> None:
    """A second Ctrl-C must not cut the stop short and leave the server's group running;
    stop() is bounded (SIGTERM grace, then SIGKILL)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM stops the launches like Ctrl-C does


def stop_on_interrupts() -> None:
    """Ctrl-C and SIGTERM stop what this process keeps up, whatever it inherited: a shell
    script's ``cmd &`` starts ``cmd`` with SIGINT ignored (POSIX), and a parent may have
    left it blocked."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})


def serve_until_stopped(
    name: str,
    launches: list[NodeLaunch],
    node_rank: int | None,
    timeout_s: float,
    say: Say,
    log_dir: Path,
    workdir: Path | None = None,
) -> int:
    """Start a node's serving launches and keep them up until Ctrl-C or SIGTERM (0), or
    until one fails to start or dies (1, the reason on stderr); every one is stopped,
    the last started first (the server before the Ray head it uses)."""
    processes: list[ManagedProcess] = []
    stop_on_interrupts()
    try:
        start_node(name, launches, node_rank, timeout_s, say, processes, log_dir, workdir)
        while True:
            for process in processes:
                process.check_alive()
            time.sleep(1.0)
    except KeyboardInterrupt:
        ignore_interrupts()  # before saying so: a second Ctrl-C may follow "stopping" at once
        say("stopping")
        return 0
    except (StartFailed, LaunchError) as exc:
        print(str(exc), file=sys.stderr, flush=True)
        return 1
    finally:
        ignore_interrupts()
        for process in reversed(processes):
            process.stop()


def run_to_completion(launch: NodeLaunch, log: Path, timeout_s: float, workdir: Path) -> int:
    """A finite launch (a trainer): its exit code; SIGTERM or the deadline stops its group."""
    process = ManagedProcess(launch, log, workdir=workdir)
    stop_on_interrupts()
    try:
        try:
            process.start()
        except OSError as exc:
            print(f"cannot start {launch.argv[0]}: {exc.strerror or exc}", file=sys.stderr)
            return 127
        except StartFailed as exc:
            print(f"cannot start: {exc}", file=sys.stderr, flush=True)
            return 127
        print(
            f"started {launch.framework} {launch.role} (pid {process.pid}); log: {log}", flush=True
        )
        code = process.wait(timeout_s)
    except LaunchError as exc:
        print(str(exc), file=sys.stderr, flush=True)
        return 124
    except KeyboardInterrupt:
        ignore_interrupts()
        print("stopping", flush=True)
        return 130
    finally:
        ignore_interrupts()
        process.stop()
    print(f"{launch.framework} {launch.role} exited with code {code}", flush=True)
    for problem in nsys_reports_summed(launch, workdir):
        print(f"profile: no kernel table: {problem}", flush=True)
    if code:
        print(process.log_tail(), file=sys.stderr, flush=True)
    return code


def nsys_reports_summed(launch: NodeLaunch, workdir: Path) -> list[str]:
    """After a finite launch that ran under nsys (a trainer): its reports summed into their
    kernel tables, in the folder its ``--output`` names (in ``workdir`` where relative);
    the problems, [] for a launch not under nsys."""
    argv = launch.argv
    if "nsys" not in argv or "--capture-range" not in argv:
        return []
    folder = Path(flag_value(argv, "--output").replace(WORKDIR, str(workdir))).parent
    folder = folder if folder.is_absolute() else workdir / folder
    found = sorted(folder.glob(f"*{profilers.NSYS_REPORT_SUFFIX}")) if folder.is_dir() else []
    return profilers.PROFILERS["nsys"].summarize(found, argv[argv.index("nsys")])


def main(argv: list[str] | None = None) -> int:
    """The node side: ``serve`` or ``run`` the launches in a plan file the controller wrote
    (``{"poc": name, "node_rank": N, "timeout_s": S, "launches": [NodeLaunch.as_dict()]}``),
    in the plan file's folder, logs under ``logs/`` beside it."""
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(
        prog="node_launcher.py", description="Start the launches the pocforge controller planned."
    )
    parser.add_argument("mode", choices=["serve", "run"])
    parser.add_argument("plan", type=Path, help="the node's launches, as JSON")
    args = parser.parse_args(argv)
    plan = json.loads(args.plan.read_text())
    workdir = args.plan.resolve().parent
    launches = in_start_order([NodeLaunch.from_dict(one) for one in plan["launches"]])
    log_dir = workdir / "logs"
    say = lambda line: print(line, flush=True)  # noqa: E731 - the launcher's report
    if args.mode == "serve":
        return serve_until_stopped(
            plan["poc"], launches, plan.get("node_rank"), plan["timeout_s"], say, log_dir, workdir
        )
    return run_in_order(plan["poc"], launches, plan["timeout_s"], log_dir, workdir)


def run_in_order(
    poc: str, launches: list[NodeLaunch], timeout_s: float, log_dir: Path, workdir: Path
) -> int:
    """A node's finite launches one after the other (a conversion, then the trainer), each
    to completion; the first that fails ends the run with its code. A step whose result
    (``creates``) is there already is skipped: it ran before."""
    deadline = time.monotonic() + timeout_s
    for launch in launches:
        if launch.done():
            print(
                f"{launch.framework} {launch.role}: {launch.creates} is there; skipped", flush=True
            )
            continue
        log = log_dir / f"{poc}-{launch.framework}-rank{launch.node_rank}-{launch.role}.log"
        left = max(deadline - time.monotonic(), 1.0)
        code = run_to_completion(launch, log, left, workdir)
        if code:
            return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
