"""How far each node's clock is from this machine's, measured over the SSH the kit already
uses, so a point's window cuts every node's telemetry at the same instant.

The nodes stamp their telemetry with their own clock (:mod:`pocforge.telemetry.recorder`);
the benchmark's windows are in the controller's. Clocks are only as close as each node's
NTP, and a node that lost it can be seconds off, which moves a point's window over another
part of that node's samples. Cristian's algorithm: once the SSH session to a node is up
(its ``python3`` prints ``ready``), this machine notes its time, asks for the node's, and
notes its time again; the node read its clock inside that round trip, so its offset is
``node - (before + after) / 2`` within half the round trip. The shortest of a few rounds
is kept. Over an established session a round trip is the network's, not SSH's handshake:
milliseconds on a cluster's network, far inside a one-second sampling interval.
"""

from __future__ import annotations

import shlex
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pydantic import BaseModel, Field

from pocforge.frameworks.base import InventoryHost, inventory_hosts

ROUNDS = 3
# the node prints "ready" once up, then its clock for every line it reads
PROBE = (
    "import sys, time\n"
    "print('ready', flush=True)\n"
    "for _ in sys.stdin: print(repr(time.time()), flush=True)\n"
)
CONNECT_TIMEOUT_S = 10  # ssh's ConnectTimeout, as the playbooks' connections use


class ClockReading(BaseModel):
    """One node's clock against this machine's."""

    host: str
    at_s: float = Field(description="This machine's time of the reading (its round trip's middle).")
    offset_s: float = Field(description="The node's clock minus this machine's, seconds.")
    rtt_s: float = Field(description="The round trip it was read in; the offset is good to half.")
    label: str = Field("", description="What it was read for: a point's id, 'training'.")


def node_command(host: InventoryHost, extravars: dict) -> list[str]:
    """The argv that runs a command on ``host`` as the playbooks reach it: SSH with the
    inventory's user, key, port and options (the host-key policy in ``extravars``), a job
    step on a Slurm allocation's node (the command as ``sh -c``'s), or nothing for the
    controller itself."""
    if host.local:
        return []
    v = {**host.variables, **extravars}
    if v.get("ansible_connection") == "srun":  # a job step of the allocation on the node
        step = [*v["pocforge_slurm_step"], f"--nodelist={host.name}", "--chdir=/tmp"]
        return [*step, "--job-name=pocforge-clock", "/bin/sh", "-c"]
    argv = ["ssh", "-p", str(host.port), "-o", "BatchMode=yes",
            "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}"]  # fmt: skip
    if v.get("ansible_ssh_private_key_file"):
        argv += ["-i", str(v["ansible_ssh_private_key_file"])]
    argv += shlex.split(str(v.get("ansible_ssh_common_args", "")))
    user = v.get("ansible_user")
    return [*argv, f"{user}@{host.address}" if user else host.address]


def read_clock(
    host: str, prefix: list[str], python: str = "python3", rounds: int = ROUNDS
) -> ClockReading:
    """``host``'s clock read through ``prefix`` (:func:`node_command`) by its ``python``;
    raises OSError when the node does not answer within the connection's timeout."""
    command = [*prefix, *([shlex.join([python, "-c", PROBE])] if prefix else [python, "-c", PROBE])]
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    # one deadline: the connection's, and a round each as long again
    timer = threading.Timer(CONNECT_TIMEOUT_S * (1 + rounds), proc.kill)
    timer.start()
    try:
        assert proc.stdin is not None and proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            raise OSError(f"{host}: no clock ({(proc.stderr.read() if proc.stderr else '')[:200]})")
        best: ClockReading | None = None
        for _ in range(rounds):
            before = time.time()
            proc.stdin.write("\n")
            proc.stdin.flush()
            answer = proc.stdout.readline()
            after = time.time()
            if not answer:
                raise OSError(f"{host}: the clock probe ended")
            middle = (before + after) / 2
            reading = ClockReading(host=host, at_s=middle, offset_s=float(answer) - middle,
                                   rtt_s=after - before)  # fmt: skip
            if best is None or reading.rtt_s < best.rtt_s:
                best = reading
        assert best is not None
        return best
    finally:
        timer.cancel()
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(timeout=CONNECT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def node_clocks(
    inventory: Path, extravars: dict, label: str = ""
) -> tuple[list[ClockReading], list[str]]:
    """Every host's clock, read at once; the readings and, for a node that did not answer,
    why (a node's clock is extra: its telemetry stays as it was stamped)."""
    hosts = inventory_hosts(inventory)

    def one(host: InventoryHost) -> ClockReading | str:
        python = str({**host.variables, **extravars}.get("ansible_python_interpreter", "python3"))
        try:
            reading = read_clock(host.name, node_command(host, extravars), python)
        except (OSError, ValueError) as exc:
            return f"{host.name}: clock not read ({exc})"
        return reading.model_copy(update={"label": label})

    with ThreadPoolExecutor(max_workers=max(1, len(hosts))) as pool:
        found = list(pool.map(one, hosts))
    return [r for r in found if isinstance(r, ClockReading)], [
        r for r in found if isinstance(r, str)
    ]
