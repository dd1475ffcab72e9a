"""A real Slurm over the rehearsal's namespaced nodes: the controller's daemons here, a
slurmd in each node, from Debian's packages (``make setup``: slurm-wlm 22.05, munge).

Measured here (2026-12-06): munged on this machine serves every node (they share its
``/run/munge``); ``slurmctld`` must be named by this machine's hostname, at the controller's
address on the nodes' bridge; each slurmd runs in its node's own namespaces, those of the
node's sshd (``nsenter --target``: network, hostname, and mounts with the node's private
``/opt``, ``/tmp`` and cgroup file systems; under a bare ``ip netns exec`` slurmd finds no
cgroup file system), a hosts file naming every node bound over ``/etc/hosts``. A job step
then sees what a task over SSH sees. GPUs are fake (``gres.conf`` over
character devices 195,N, as NVIDIA's), so GPU requests are judged as on a GPU site.
``proctrack/pgid`` ends a step's process tree on ``scancel``; no accounting database, so
accounts and QoS names are taken as given.

Every process it starts is ended by pid on :meth:`SlurmCluster.close`, also on failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from pocforge.rehearse.nodes import CONTROLLER_IP, NetnsCluster

PROGRAMS = ("slurmctld", "slurmd", "munged", "sbatch")
GPUS = 8  # fake GPUs per node
TIMEOUT_S = 20  # every client call: srun and friends wait on a dead munged forever


def missing_daemons() -> str | None:
    """What this machine lacks to run Slurm (None: nothing)."""
    absent = [name for name in PROGRAMS if shutil.which(name) is None]
    return f"no {', '.join(absent)} (make setup installs slurm-wlm and munge)" if absent else None


@dataclass
class SlurmCluster:
    nodes: NetnsCluster
    workdir: Path
    partitions: tuple[str, ...] = ("batch",)
    _started: list[subprocess.Popen] = field(default_factory=list)
    _slurmd: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def site(self) -> Path:
        """The files every node's slurmd reads and writes (configuration, spool, state,
        fake devices, hosts), where the nodes see them: a site's ``/etc/slurm`` and
        ``/var/spool``, here in the rehearsal's site folder, not in ``workdir`` (the nodes see
        nothing of this machine's disk); :meth:`close` keeps their logs in ``workdir``."""
        return self.nodes.site_dir / "slurm"

    @property
    def conf(self) -> Path:
        return self.site / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def _write(self) -> None:
        hosts = self.nodes.hosts
        devices = self.site / "dev"
        devices.mkdir(parents=True, exist_ok=True)
        for index in range(GPUS):
            device = devices / f"nvidia{index}"
            if not device.exists():
                os.mknod(device, 0o666 | 0o020000, os.makedev(195, index))
        for host in hosts:
            (self.site / "spool" / host.name).mkdir(parents=True, exist_ok=True)
        (self.site / "state").mkdir(exist_ok=True)
        me, w = os.uname().nodename, self.site
        lines = [
            "ClusterName=pocforge",
            f"SlurmctldHost={me}({CONTROLLER_IP})",
            "SlurmUser=root",
            "SlurmdUser=root",
            "SlurmctldPort=16817",
            "SlurmdPort=16818",
            "AuthType=auth/munge",
            f"StateSaveLocation={w}/state",
            f"SlurmdSpoolDir={w}/spool/%n",
            f"SlurmdPidFile={w}/slurmd-%n.pid",
            f"SlurmdLogFile={w}/slurmd-%n.log",
            f"SlurmctldPidFile={w}/slurmctld.pid",
            f"SlurmctldLogFile={w}/slurmctld.log",
            "ProctrackType=proctrack/pgid",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "ReturnToService=2",
            "KillWait=5",
            # a node whose slurmd stops answering is DOWN within seconds, not Slurm's 300 s
            "SlurmdTimeout=10",
            "MpiDefault=none",
            "AccountingStorageType=accounting_storage/none",
            "JobAcctGatherType=jobacct_gather/none",
            "GresTypes=gpu",
            *(
                f"NodeName={h.name} NodeAddr={h.address} CPUs=2 Gres=gpu:fake:{GPUS} State=UNKNOWN"
                for h in hosts
            ),
            *(
                f"PartitionName={name} Nodes=ALL Default={'YES' if i == 0 else 'NO'} "
                "MaxTime=INFINITE State=UP"
                for i, name in enumerate(self.partitions)
            ),
        ]
        self.conf.write_text("\n".join(lines) + "\n")
        (w / "gres.conf").write_text(
            "".join(
                f"NodeName={h.name} Name=gpu Type=fake File={devices}/nvidia[0-{GPUS - 1}]\n"
                for h in hosts
            )
        )
        names = "".join(f"{h.address} {h.name}\n" for h in hosts)
        (w / "hosts").write_text(f"127.0.0.1 localhost\n{CONTROLLER_IP} {me}\n{names}")

    def _munge_answers(self) -> bool:
        done = subprocess.run(
            "munge -n | unmunge", shell=True, capture_output=True, timeout=TIMEOUT_S
        )
        return done.returncode == 0

    def start(self) -> SlurmCluster:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._write()
        if not self._munge_answers():  # one munged serves here and every node
            Path("/run/munge").mkdir(exist_ok=True)
            shutil.chown("/run/munge", "munge", "munge")
            with (self.workdir / "munged.out").open("w") as log:  # one line per credential
                munged = subprocess.Popen(
                    ["munged", "-F"], user="munge", group="munge", stdout=log, stderr=log
                )
            self._started.append(munged)
            deadline = time.monotonic() + TIMEOUT_S
            while not self._munge_answers():
                if time.monotonic() > deadline:
                    raise RuntimeError("munged did not answer")
                time.sleep(0.2)
        # -c: no job of an earlier rehearsal's state holds the nodes
        with (self.workdir / "slurmctld.out").open("w") as log:  # the daemon keeps its copy
            self._started.append(
                subprocess.Popen(["slurmctld", "-D", "-c"], env=self.env, stdout=log, stderr=log)
            )
        for host in self.nodes.hosts:
            # the nodes' names, for the node: bound once, in its sshd's mount namespace
            inside = ["nsenter", f"--target={host.sshd.pid}", "--mount"]
            subprocess.run([*inside, "mount", "--bind", str(self.site / "hosts"), "/etc/hosts"],
                           check=True, timeout=TIMEOUT_S)  # fmt: skip
            self.start_slurmd(host)
        self.wait_idle()
        return self

    def start_slurmd(self, host) -> None:
        """``host``'s slurmd in the node's own namespaces (those of its sshd: network,
        hostname, mounts with its private ``/opt`` and ``/tmp`` and the hosts file
        :meth:`start` bound), so a job step sees what a task over SSH sees."""
        argv = ["nsenter", f"--target={host.sshd.pid}", "--net", "--uts", "--mount",
                "slurmd", "-D", "-N", host.name]  # fmt: skip
        with (self.workdir / f"slurmd-{host.name}.out").open("a") as out:
            self._slurmd[host.name] = subprocess.Popen(argv, env=self.env, stdout=out, stderr=out)
        self._started.append(self._slurmd[host.name])

    def kill_slurmd(self, host) -> None:
        """``host``'s slurmd ended outright (SIGKILL), as a node the scheduler loses."""
        process = self._slurmd.pop(host.name)
        process.kill()
        process.wait(timeout=10)

    def wait_idle(self) -> None:
        """Until Slurm has every node idle (a restarted slurmd registers in seconds)."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            done = self.client("sinfo", "-h", "-o", "%T")
            states = set(done.stdout.split())
            if done.returncode == 0 and states == {"idle"}:
                return
            time.sleep(0.5)
        raise RuntimeError(f"Slurm's nodes never became idle: {done.stdout.strip()}")

    def client(self, *argv: str) -> subprocess.CompletedProcess:
        """A Slurm client command against this cluster, bounded in time."""
        return subprocess.run(
            list(argv), env=self.env, capture_output=True, text=True, timeout=TIMEOUT_S
        )

    def test_only(self, salloc: list[str]) -> tuple[bool, str]:
        """Slurm's own judgement of an allocation (``salloc`` as
        :func:`pocforge.runtimes.slurm.allocation` writes it): ``sbatch --test-only`` with
        its flags, ``--wrap=true`` standing for the script an allocation does not have."""
        flags = [part for part in salloc[1:] if part != "--no-shell"]
        done = self.client("sbatch", "--test-only", *flags, "--wrap=true")
        return done.returncode == 0, (done.stderr or done.stdout).strip()

    def close(self) -> None:
        for process in reversed(self._started):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=5)
        self._started.clear()
        for log in self.site.glob("*.log"):  # the daemons' own logs, kept with the rest
            shutil.copy(log, self.workdir / log.name)
