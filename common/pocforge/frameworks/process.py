"""Run one launch as a managed process: start, wait healthy, log, notice a crash, stop.

The process gets its own session (process group), so stopping ends everything it spawned
(vLLM's engine core, SGLang's scheduler and detokenizer) and nothing else. Logs go to a
file in the run folder as they are written; errors carry the last lines of that log.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections import deque
from pathlib import Path

from pocforge.frameworks.base import NodeLaunch


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now (for servers started here)."""
    with socket.socket() as sock:
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


class ManagedProcess:
    def __init__(self, launch: NodeLaunch, log_file: Path, workdir: Path | None = None):
        self.launch = launch
        self.log_file = log_file
        self.workdir = workdir or log_file.parent
        self.proc: subprocess.Popen | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> ManagedProcess:
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        self.workdir.mkdir(parents=True, exist_ok=True)
        for name, content in self.launch.files.items():
            (self.workdir / name).write_text(content)
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.launch.env}  # logs stream as written
        log = self.log_file.open("ab", buffering=0)
        log.write(f"$ {self.launch.command_line()}\n".encode())
        argv = [arg.replace(WORKDIR, str(self.workdir)) for arg in self.launch.argv]
        self.proc = subprocess.Popen(
            argv,
            env=env,
            cwd=self.workdir,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()  # the child holds its own descriptor
        return self

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def exit_code(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def check_alive(self) -> None:
        """Raise ``ServerCrashed`` if the process has exited."""
        code = self.exit_code()
        if code is not None:
            raise ServerCrashed(
                f"{self.launch.framework} exited with code {code}", code, self.log_tail()
            )

    def wait_healthy(self, timeout_s: float = 300.0, interval_s: float = 1.0) -> float:
        """Poll the health URL until it answers 200; return seconds waited."""
        if self.launch.health_url is None:
            raise ValueError(f"{self.launch.role} launch has no health URL")
        start = time.monotonic()
        while True:
            self.check_alive()
            try:
                with urllib.request.urlopen(self.launch.health_url, timeout=5) as response:
                    if response.status == 200:
                        return time.monotonic() - start
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            if time.monotonic() - start > timeout_s:
                self.stop()
                raise LaunchError(
                    f"{self.launch.framework} not healthy at {self.launch.health_url} after {timeout_s:.0f} s",
                    self.exit_code(),
                    self.log_tail(),
                )
            time.sleep(interval_s)

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
        if self.proc.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.proc.wait(timeout=10)
        self._signal(signal.SIGKILL)  # stragglers left in the group by a clean exit
        deadline = time.monotonic() + 10
        while self.live_group_members() and time.monotonic() < deadline:
            time.sleep(0.05)  # a killed process lingers until the kernel has torn it down
        return self.proc.returncode

    def _signal(self, sig: int) -> None:
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)  # our own session: pgid == pid

    def live_group_members(self) -> list[int]:
        """Pids still running (not zombies) in this process's group, read from /proc."""
        if self.proc is None:
            return []
        members = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            state, pgrp = fields[0], int(fields[2])
            if pgrp == self.proc.pid and state not in ("Z", "X"):
                members.append(int(stat.parent.name))
        return members

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
