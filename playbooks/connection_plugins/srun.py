"""Reach a node of a Slurm allocation through job steps instead of SSH.

Every command a task runs on a host is one ``srun`` step of the run's allocation on that
node (``pocforge_slurm_step``, :func:`pocforge.runtimes.slurm.node_step`: the job, one
task, ``--overlap`` so it shares the node with the deployment's steps, a plain environment,
not the controller's); a file goes there on the step's standard input and comes back on its
standard output, so a node needs nothing but Slurm, as a site's compute node has. The same
playbooks (bring-up, preflight, collectives, collect, teardown) then run on a cluster a
scheduler owns, each probe a step of the job, its exit the task's.

Written here because Ansible ships no Slurm connection (ansible-core has ssh, local, psrp
and winrm; community.general none for Slurm): a few dozen lines against
:class:`ConnectionBase`, as Ansible's own ``local`` connection is written.
"""

from __future__ import annotations

import hashlib
import shlex
import subprocess

from ansible.errors import AnsibleConnectionFailure
from ansible.plugins.connection import ConnectionBase

DOCUMENTATION = """
name: srun
short_description: run each task as a job step of a Slurm allocation
description:
  - A task's commands run as C(srun) steps of the allocation on the host's node; files go
    there on the step's standard input and come back on its standard output.
author: pocforge
options:
  step:
    description: The start of a step's srun line (the job, one task, its environment).
    type: list
    elements: str
    vars:
      - name: pocforge_slurm_step
  node:
    description: The Slurm node name of the host (the inventory names hosts as Slurm does).
    vars:
      - name: inventory_hostname
  timeout:
    description: Seconds a step may wait for its node before the host counts as unreachable.
    default: 60
    vars:
      - name: pocforge_slurm_step_timeout
"""


TRANSFER_TRIES = 3


class Connection(ConnectionBase):
    transport = "srun"
    has_pipelining = True

    def _connect(self):
        self._connected = True
        return self

    def _srun(self, *command: str) -> list[str]:
        node = self.get_option("node")
        return [
            *self.get_option("step"),
            f"--nodelist={node}",
            "--chdir=/tmp",
            f"--immediate={self.get_option('timeout')}",
            f"--job-name=pocforge-task-{node}",
            *command,
        ]

    def _step(self, command: list[str], data: bytes | None = None):
        argv = self._srun(*command)
        self._display.vvv(f"SRUN: {shlex.join(argv)}", host=self.get_option("node"))
        try:
            done = subprocess.run(
                argv,
                input=data,
                stdin=None if data is not None else subprocess.DEVNULL,
                capture_output=True,
            )
        except OSError as exc:
            raise AnsibleConnectionFailure(f"srun: {exc.strerror or exc}") from None
        # srun's own failures (the job gone, the node down) leave the step unstarted; a task
        # that ran and failed is reported by srun as "<node>: task 0: Exited ..." instead
        said = done.stderr.decode(errors="replace")
        if done.returncode != 0 and "srun: error:" in said and ": task 0: " not in said:
            raise AnsibleConnectionFailure(said.strip())
        return done

    def exec_command(self, cmd, in_data=None, sudoable=True):
        super().exec_command(cmd, in_data=in_data, sudoable=sudoable)
        done = self._step(["/bin/sh", "-c", cmd], data=in_data)
        return done.returncode, done.stdout, done.stderr

    # A file crosses srun's standard input or output, which now and then loses a transfer
    # (measured with Slurm 22.05 here: 2 of 240 reads of 600 kB ended "io error with
    # slurmstepd", the bytes cut short). A transfer only reads, or writes a temporary file
    # renamed once whole, so each is checked by its SHA-256 and made again when it did not
    # arrive whole; a task's own command is never run twice.
    def _whole(self, what: str, command: str, data: bytes | None, arrived) -> bytes:
        said = ""
        for _ in range(TRANSFER_TRIES):
            try:
                done = self._step(["/bin/sh", "-c", command], data=data)
            except AnsibleConnectionFailure as exc:
                said = str(exc)
                continue
            if done.returncode == 0 and arrived(done):
                return done.stdout
            said = done.stderr.decode(errors="replace").strip() or f"exit {done.returncode}"
        raise AnsibleConnectionFailure(f"{what}: not whole after {TRANSFER_TRIES} tries: {said}")

    def put_file(self, in_path, out_path):
        super().put_file(in_path, out_path)
        with open(in_path, "rb") as source:
            data = source.read()
        digest = hashlib.sha256(data).hexdigest()
        target, partial = shlex.quote(out_path), shlex.quote(f"{out_path}.pocforge-partial")
        command = (
            f"cat > {partial} && test \"$(sha256sum < {partial})\" = '{digest}  -' "
            f"&& mv {partial} {target} && echo whole; rm -f {partial}"
        )
        self._whole(f"writing {out_path}", command, data, lambda done: done.stdout == b"whole\n")

    def fetch_file(self, in_path, out_path):
        super().fetch_file(in_path, out_path)
        source = shlex.quote(in_path)

        def arrived(done) -> bool:
            sent = done.stderr.decode(errors="replace").split()
            return bool(sent) and hashlib.sha256(done.stdout).hexdigest() == sent[0]

        command = f"sha256sum < {source} >&2 && cat {source}"
        data = self._whole(f"reading {in_path}", command, None, arrived)
        with open(out_path, "wb") as target:
            target.write(data)

    def close(self):
        self._connected = False
