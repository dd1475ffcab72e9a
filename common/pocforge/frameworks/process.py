"""A framework process, managed: started in its own session with its log streamed to a file,
watched until healthy, noticed when it crashes, and stopped with everything it spawned.

Each process gets its own session (process group), so stopping ends everything it spawned
(vLLM's engine core, SGLang's scheduler and detokenizer) and nothing else. Errors carry the
last lines of the log.

This is the kit's one process manager, here and on the nodes: like ``launch_plan.py``, which
it imports, and ``node_launcher.py``, which starts a node's launches with it, it imports
nothing but the standard library, so bring-up need not install the kit on a node.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import random
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
from pathlib import Path

if __package__:  # the kit's
    from pocforge.frameworks.launch_plan import NodeLaunch, container_of, on_node
else:  # a script on a node: the workload role copies launch_plan.py beside it (found there
    # also under ``python3 -I``, which leaves the script's folder off sys.path)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from launch_plan import NodeLaunch, container_of, on_node

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
