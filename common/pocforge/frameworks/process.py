"""Run a node's launches as managed processes: start in order, wait ready, log, notice a
crash, stop.

Each process gets its own session (process group), so stopping ends everything it spawned
(vLLM's engine core, SGLang's scheduler and detokenizer) and nothing else. Logs go to a
file as they are written; errors carry the last lines of that log.

This module is the kit's one process manager, here and on the nodes: it imports nothing
but the standard library and ``profilers.py`` (the same), so bring-up need not install the
kit on a node. The workload role copies both files to the node and runs this one on the
launches the controller planned::

    python3 process.py serve serve.launches.json   # start in order, stay up until SIGTERM
    python3 process.py run train.launches.json     # run to completion, exit with its code

(A node's ``python3`` is the one Ansible already needs; the frameworks run in their own
runtime, a container or a venv, named in each launch's argv.)
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import dataclasses
import errno
import json
import os
import random
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

if __package__:  # the kit's
    from pocforge.frameworks import profilers
else:  # a script on a node: the workload role copies profilers.py beside it (found there
    # also under ``python3 -I``, which leaves the script's folder off sys.path)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import profilers

Role = Literal[
    "convert",
    "server",
    "ray-head",
    "ray-worker",
    "headless",
    "prefill",
    "decode",
    "router",
    "launcher",
    "trainer",
]
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


@dataclass
class NodeLaunch:
    """One process to start on one node: command, environment and generated files."""

    deployment: Literal["serving", "training"]
    framework: str
    node_rank: int
    host: str
    role: Role
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(
        default_factory=dict
    )  # name -> content, written to the working directory
    health_url: str | None = None  # polled until it answers 200 (servers only)
    check_args: list[str] | None = None  # the part the framework's own parser validates
    # Where it runs (pocforge.runtimes): kind, image, the framework's own argv and env.
    runtime: dict | None = None
    instance: int | None = None  # which server of its pool (disaggregated prefill / decode)
    # A step's result (a path on the node): present, the step is done and is skipped
    creates: str | None = None
    # Variables passed by reference (pocforge.runtimes.secrets): taken on the node from its
    # environment, else from ``secrets_file``; never a value in the plan
    secrets: list[str] = field(default_factory=list)
    secrets_file: str | None = None
    # Its framework's argument check, run on the node before weights are staged
    # (launch_check.py): {"script": an argcheck script, "item": its input}
    check: dict | None = None

    def done(self) -> bool:
        """A step whose result (``creates``) is there already: it ran before."""
        return bool(self.creates) and Path(self.creates).exists()  # type: ignore[arg-type]

    def command(self) -> str:
        """The argv as one shell-quoted line."""
        return " ".join(shlex.quote(a) for a in self.argv)

    def command_line(self) -> str:
        """The command with its environment prefixed, as one shell line."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items()))
        return f"{env} {self.command()}".strip()

    def as_dict(self) -> dict:
        return {
            "deployment": self.deployment,
            "framework": self.framework,
            "node_rank": self.node_rank,
            "host": self.host,
            "role": self.role,
            "argv": self.argv,
            "env": self.env,
            "files": self.files,
            "health_url": self.health_url,
            **({"runtime": self.runtime} if self.runtime else {}),
            **({"instance": self.instance} if self.instance is not None else {}),
            **({"creates": self.creates} if self.creates else {}),
            **(
                {"secrets": self.secrets, "secrets_file": self.secrets_file} if self.secrets else {}
            ),
            **({"check": self.check} if self.check else {}),
        }

    @classmethod
    def from_dict(cls, data: dict) -> NodeLaunch:
        """The inverse of :meth:`as_dict` (a node reads its planned launches back)."""
        return cls(**{key: data[key] for key in cls.__dataclass_fields__ if key in data})


def container_of(launch: NodeLaunch) -> tuple[str, str] | None:
    """(engine, container name) of a container launch (``runtimes.container.wrap``), else None."""
    runtime = launch.runtime or {}
    if runtime.get("kind") != "container":
        return None
    return runtime["engine"], runtime["name"]


EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
PORT_SPAN = 16  # ports above the one returned kept free too: a P/D pair's instances use port+1+n


def _ephemeral_low() -> int:
    """The lowest port the kernel hands out for ``bind(0)`` and outgoing connections."""
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _bindable(host: str, port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1", span: int = PORT_SPAN) -> int:
    """A TCP port free on ``host`` right now, with the ``span - 1`` ports above it.

    Chosen below the kernel's ephemeral range, not by ``bind(0)``: the frameworks started
    before the front server (a P/D pair's instances, vLLM's engine cores) open ephemeral
    ports of their own, and one of them once took the router's port before the router
    started. A port below the range is never handed out that way."""
    high = _ephemeral_low() - span
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(10000, high)
        if all(_bindable(host, port + n) for n in range(span)):
            return port
    with socket.socket() as sock:  # everything tried is taken: fall back to the kernel's pick
        sock.bind((host, 0))
        return sock.getsockname()[1]


class LaunchError(RuntimeError):
    """A framework process failed to start or died; carries its exit code and log tail."""

    def __init__(self, message: str, exit_code: int | None = None, log_tail: str = ""):
        self.exit_code = exit_code
        self.log_tail = log_tail
        super().__init__(f"{message}\n--- last log lines ---\n{log_tail}" if log_tail else message)


class ServerCrashed(LaunchError):
    """The process exited while it should have been serving."""


# In a launch's argv, the folder the process starts in and its generated files are written
# to (a container mounts it at the same path); replaced when the process starts.
WORKDIR = "{workdir}"


def on_node(launch: NodeLaunch, workdir: str) -> NodeLaunch:
    """``launch`` as it runs in ``workdir``: the :data:`WORKDIR` placeholder of its argv and
    of the folders its container writes replaced (what the process manager starts, and what
    ``launch --print`` shows)."""

    def put(text: str) -> str:
        return text.replace(WORKDIR, workdir)

    runtime = dict(launch.runtime) if launch.runtime else None
    if runtime is not None:
        runtime["written"] = [put(f) for f in runtime.get("written", [])]
        runtime["inner_argv"] = [put(a) for a in runtime.get("inner_argv", [])]
    return dataclasses.replace(launch, argv=[put(a) for a in launch.argv], runtime=runtime)


class ManagedProcess:
    def __init__(self, launch: NodeLaunch, log_file: Path, workdir: Path | None = None):
        self.launch = launch
        self.log_file = log_file
        self.workdir = workdir or log_file.parent
        self.proc: subprocess.Popen | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> ManagedProcess:
        taken = port_taken(self.launch.health_url)
        if taken:
            raise LaunchError(
                f"{self.launch.framework} {self.launch.role}: {taken} (another server, or one "
                "left running?): stop it, or set serving.port to a free port"
            )
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        self.workdir.mkdir(parents=True, exist_ok=True)
        for name, content in self.launch.files.items():
            (self.workdir / name).parent.mkdir(parents=True, exist_ok=True)
            (self.workdir / name).write_text(content)
        here = on_node(self.launch, str(self.workdir))
        for folder in (here.runtime or {}).get("written", []):  # a container mounts it
            Path(folder).mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.launch.env}  # logs stream as written
        env.update(node_secrets(self.launch))
        log = self.log_file.open("ab", buffering=0)
        log.write(f"$ {self.launch.command_line()}\n".encode())
        argv = here.argv
        # a container left by a launch that died with its node would block the name
        self._remove_container()
        # Started from the main thread, the process is told to stop when we die (the
        # kernel's parent-death signal follows the thread that forked it, so a process
        # started from a worker thread relies on its pid file alone).
        on_main = threading.current_thread() is threading.main_thread()
        self.proc = subprocess.Popen(
            argv,
            env=env,
            cwd=self.workdir,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_stop_with(os.getpid()) if on_main else None,  # noqa: PLW1509
        )
        log.close()  # the child holds its own descriptor
        self._write_pid_file()
        return self

    @property
    def pid_file(self) -> Path:
        """Where a running process is recorded beside its log (removed when it stops), so
        one left by a killed controller is found and stopped by the next attempt
        (:func:`stop_leftovers`)."""
        return self.log_file.with_name(self.log_file.name + ".pid")

    def _write_pid_file(self) -> None:
        assert self.proc is not None
        started = start_ticks(self.proc.pid)
        record = {"pid": self.proc.pid, "start_ticks": started, "argv0": self.launch.argv[0]}
        with contextlib.suppress(OSError):
            self.pid_file.write_text(json.dumps(record) + "\n")

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def exit_code(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def check_alive(self) -> None:
        """Raise ``ServerCrashed`` if the process has exited."""
        code = self.exit_code()
        if code is not None:
            raise ServerCrashed(f"{self.what()} exited with code {code}", code, self.log_tail())

    def what(self) -> str:
        """The launch in words: ``vllm`` (a server), ``vllm decode1``, ``vllm router``."""
        launch = self.launch
        if launch.role == "server":
            return launch.framework
        return (
            f"{launch.framework} {launch.role}{'' if launch.instance is None else launch.instance}"
        )

    def wait_healthy(
        self, timeout_s: float = 300.0, interval_s: float = 1.0, siblings: tuple = ()
    ) -> float:
        """Poll the health URL until it answers 200; return seconds waited. ``siblings``:
        processes started with this one, whose death also ends the wait."""
        if self.launch.health_url is None:
            raise ValueError(f"{self.launch.role} launch has no health URL")
        url = self.launch.health_url

        def answers() -> bool:
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    return response.status == 200
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                return False

        failure = f"{self.launch.framework} not healthy at {url}"
        return poll_until(self, answers, timeout_s, interval_s, failure, siblings)

    def wait(self, timeout_s: float) -> int:
        """Wait for a finite process (a trainer); kill it past the timeout."""
        assert self.proc is not None
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.stop()
            raise LaunchError(
                f"{self.launch.framework} still running after {timeout_s:.0f} s; stopped",
                self.exit_code(),
                self.log_tail(),
            ) from None

    def stop(self, grace_s: float = 15.0) -> int | None:
        """SIGTERM the whole process group, SIGKILL what is left after ``grace_s``."""
        if self.proc is None:
            return None
        proc = self.proc

        def leader_exited(timeout_s: float) -> bool:  # our own child: reaped, no zombie
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                return False
            return True

        end_group(proc.pid, grace_s, leader_exited if proc.poll() is None else None)
        self._remove_container()
        with contextlib.suppress(OSError):
            self.pid_file.unlink(missing_ok=True)
        return self.proc.returncode

    def _remove_container(self) -> None:
        """A container launch: remove its container (before a start, and after a stop).
        ``run --rm`` removes it when the engine's client stops it, but a client killed
        outright (SIGKILL past the grace, a node's OOM killer, a lost node) leaves the
        container behind, running and holding its GPUs, or stopped and holding its name."""
        found = container_of(self.launch)
        if found is None:
            return
        engine, name = found
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run(
                [engine, "rm", "--force", name],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=60,
            )

    def live_group_members(self) -> list[int]:
        """Pids still running (not zombies) in this process's group, read from /proc."""
        return [] if self.proc is None else group_members(self.proc.pid)

    def log_tail(self, lines: int = 30) -> str:
        try:
            with self.log_file.open(errors="replace") as handle:
                return "".join(deque(handle, maxlen=lines)).rstrip()
        except OSError:
            return ""

    def __enter__(self) -> ManagedProcess:
        return self.start() if self.proc is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _until(done: Callable[[], bool], timeout_s: float, every_s: float = 0.05) -> bool:
    """Poll ``done`` until it holds or ``timeout_s`` passes; whether it held."""
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() >= deadline:
            return False
        time.sleep(every_s)
    return True


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def end_group(pgid: int, grace_s: float, leader_exited: Callable[[float], bool] | None) -> None:
    """End process group ``pgid`` (a launch runs in its own session, so pgid == its pid):
    SIGTERM, and up to ``grace_s`` for ``leader_exited(timeout)`` to say the group's
    leader is done; then SIGKILL whatever is left (everything after the grace, the
    stragglers a clean exit left), until the kernel has torn the group down (10 s at
    most). ``leader_exited`` None: the leader has already exited, only stragglers remain.

    The one way the kit ends a launch: :meth:`ManagedProcess.stop` for its own child
    (``leader_exited`` reaps it) and :func:`stop_leftovers` for one an earlier attempt
    left (``leader_exited`` waits for the group to empty)."""
    if leader_exited is not None:
        _killpg(pgid, signal.SIGTERM)
        if not leader_exited(grace_s):
            _killpg(pgid, signal.SIGKILL)
            leader_exited(10)
    _killpg(pgid, signal.SIGKILL)
    _group_emptied(pgid)(10)  # a killed process lingers until the kernel has torn it down


def _group_emptied(pgid: int) -> Callable[[float], bool]:
    """For :func:`end_group` on a group that is not our child's: it ended when it is empty."""
    return lambda timeout_s: _until(lambda: not group_members(pgid), timeout_s)


def group_members(pgid: int) -> list[int]:
    """Pids still running (not zombies) in process group ``pgid``, read from /proc."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        state, pgrp = fields[0], int(fields[2])
        if pgrp == pgid and state not in ("Z", "X"):
            members.append(int(stat.parent.name))
    return members


def port_taken(url: str | None) -> str | None:
    """Why the port a launch will listen on (its health URL's) is not free here, or None.
    Checked before the start: a server that finds its port taken fails only after loading
    its weights, minutes later. A host that is not this machine's is not checked."""
    if not url:
        return None
    parts = urllib.parse.urlsplit(url)
    if parts.port is None or parts.hostname is None:
        return None
    with socket.socket(socket.AF_INET6 if ":" in parts.hostname else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is not "taken"
        try:
            probe.bind((parts.hostname, parts.port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return f"port {parts.port} on {parts.hostname} is already in use"
            # any other error: not an address of this machine (or not resolvable here)
    return None


PR_SET_PDEATHSIG = 1


def _stop_with(parent: int) -> Callable[[], None]:
    """A ``preexec_fn``: the child gets SIGTERM when ``parent`` dies (``prctl``), and exits
    at once if it already has (the race between fork and the call)."""

    def arrange() -> None:
        # ctypes, not a package: this file runs on nodes with the standard library only
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:
            os._exit(1)

    return arrange


def start_ticks(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot, /proc's field 22): a pid the kernel
    has since given to another process has another start time."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def stop_leftovers(folder: Path, grace_s: float = 15.0) -> list[str]:
    """Stop every process recorded under ``folder`` that still runs: those a controller
    killed outright (SIGKILL, a lost session) left behind, holding their port, cores or
    GPUs. Only a recorded pid whose start time still matches is signalled (its whole
    process group: SIGTERM, SIGKILL after ``grace_s``); returns a line for each."""
    stopped = []
    for pid_file in sorted(Path(folder).rglob("*.log.pid")):
        try:
            record = json.loads(pid_file.read_text())
            pid, started = int(record["pid"]), record.get("start_ticks")
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if started is not None and start_ticks(pid) == started:
            # not our child: the group's emptying is what tells it ended
            end_group(pid, grace_s, _group_emptied(pid))
            stopped.append(
                f"{record.get('argv0', '?')} (pid {pid}) left by an earlier attempt, stopped"
            )
        with contextlib.suppress(OSError):
            pid_file.unlink()
    return stopped


# ---------------------------------------------------------------------- a node's launches


class StartFailed(RuntimeError):
    """A launch's program could not be started at all (not installed, not executable)."""


def node_secrets(launch: NodeLaunch) -> dict[str, str]:
    """The launch's secrets on this node: each from the node's environment, else from the
    POC's secrets file (``NAME=value`` lines, written by bring-up with mode 0600)."""
    found = {name: os.environ[name] for name in launch.secrets if name in os.environ}
    missing = [name for name in launch.secrets if name not in found]
    if missing and launch.secrets_file and os.path.isfile(launch.secrets_file):
        with open(launch.secrets_file) as file:
            lines = dict(line.rstrip("\n").split("=", 1) for line in file if "=" in line)
        found |= {name: lines[name] for name in missing if name in lines}
    missing = [name for name in launch.secrets if name not in found]
    if missing:
        raise StartFailed(
            f"{launch.framework} {launch.role} takes {', '.join(missing)} by reference, and this "
            f"node has it neither in its environment nor in {launch.secrets_file}: export it on "
            "the controller (model.hf_token, or the runtime.env reference) and run bring-up again"
        )
    return found


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


def poll_until(
    process: ManagedProcess,
    ready: Callable[[], bool],
    timeout_s: float,
    interval_s: float,
    failure: str,
    siblings: tuple = (),
) -> float:
    """Seconds until ``ready()`` while ``process`` (and each of ``siblings``) lives; past
    ``timeout_s`` the process is stopped and ``LaunchError("<failure> after N s")`` carries
    its log tail. A process that exits first raises ``ServerCrashed``."""
    start = time.monotonic()
    while True:
        for one in (process, *siblings):
            one.check_alive()
        if ready():
            return time.monotonic() - start
        if time.monotonic() - start > timeout_s:
            process.stop()
            raise LaunchError(
                f"{failure} after {timeout_s:.0f} s", process.exit_code(), process.log_tail()
            )
        time.sleep(interval_s)


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
        prog="process.py", description="Start the launches the pocforge controller planned."
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
