"""N throwaway nodes on this machine: network namespaces, each with a real sshd.

What ``pocforge rehearse`` runs a POC against before the customer's cluster (as Ansible's
molecule does for roles), and what the cluster tests use.

Layout (``tag`` is unique per fixture): a bridge namespace ``<tag>br`` holds bridge ``br0``;
every host namespace ``<tag>hN`` has ``eth0`` = 198.51.100.(10+N)/24 on a veth into that
bridge; the controller (this process, root namespace) reaches them through one more veth,
``<tag>c`` = 198.51.100.254/24. Each sshd runs inside its host's namespace and in its own
mount and UTS namespaces: its own hostname, a private ``/opt`` (a bind mount of
``<workdir>/hN/opt``) and a private ``/tmp`` (``<workdir>/hN/tmp``), so each host reports its
own facts and keeps its own scratch files. The folders under ``/tmp`` the nodes must still
see at the same path (the fixture's own, with sshd's configuration; a test's workspace with
the POC and the model the kit runtime reads) are bound into that private ``/tmp``. Traffic goes only to these
namespaces. ``close()`` kills every process inside them by pid, deletes the namespaces and
the controller veth; it is safe to call twice and runs from a finalizer.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pocforge.paths import kit_root

SUBNET = "198.51.100"
CONTROLLER_IP = f"{SUBNET}.254"
LOCK_PATH = "/run/lock/pocforge-netns.lock"


# Mount options that say how, not which controllers a cgroup v1 hierarchy holds.
_GENERIC_OPTIONS = {"rw", "ro", "relatime", "noatime", "nosuid", "nodev", "noexec", "seclabel"}


def cgroup_mounts(mounts: str | None = None) -> list[str]:
    """Shell commands that mount this machine's cgroup hierarchies again inside a node.

    ``ip netns exec`` mounts a fresh sysfs for the namespace, which hides
    ``/sys/fs/cgroup``; container engines (runc: "no cgroup mount found in mountinfo") need
    it. Mounting the same hierarchies again (cgroup v2, or v1 controllers under a tmpfs, as
    ``/proc/mounts`` lists them) gives the node the host's cgroups, as a container host has."""
    lines = (mounts if mounts is not None else Path("/proc/mounts").read_text()).splitlines()
    out = []
    for line in lines:
        fields = line.split()
        if len(fields) < 4 or not fields[1].startswith("/sys/fs/cgroup"):
            continue
        _, point, kind, options = fields[:4]
        if kind == "tmpfs" and point == "/sys/fs/cgroup":
            out.append("mount -t tmpfs -o mode=755 tmpfs /sys/fs/cgroup")
        elif kind == "cgroup2":
            out += [f"mkdir -p {point}", f"mount -t cgroup2 cgroup2 {point}"]
        elif kind == "cgroup":
            wanted = [o for o in options.split(",") if o not in _GENERIC_OPTIONS]
            if any(o.startswith("name=") for o in wanted) and "none" not in wanted:
                wanted.insert(0, "none")
            out += [f"mkdir -p {point}", f"mount -t cgroup -o {','.join(wanted)} cgroup {point}"]
    return out


def missing_prerequisites() -> str | None:
    """Why the fixture cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    for tool in ("ip", "unshare", "ssh", "ssh-keygen"):
        if shutil.which(tool) is None:
            return f"{tool} not installed (apt-get install iproute2 openssh-client util-linux)"
    if not Path("/usr/sbin/sshd").exists():
        return "sshd not installed (apt-get install openssh-server)"
    return None


def _ip(*args: str, netns: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    argv = ["ip", *(["-n", netns] if netns else []), *args]
    return subprocess.run(argv, capture_output=True, text=True, check=check)


@dataclass
class Host:
    name: str
    netns: str
    address: str
    root: Path  # this host's private files: opt/, sshd config and keys
    sshd: subprocess.Popen | None = None

    @property
    def opt(self) -> Path:
        return self.root / "opt"


@dataclass
class NetnsCluster:
    workdir: Path
    count: int = 3
    # Folders under /tmp every node still sees at their paths (default: the workdir's
    # parent, which holds a test's workspace, and so the workdir itself).
    shared: tuple[Path, ...] = ()
    tag: str = field(default_factory=lambda: f"pf{os.getpid() % 100000}")
    hosts: list[Host] = field(default_factory=list)
    _lock: int | None = None
    _made_netns: list[str] = field(default_factory=list)
    _made_links: list[str] = field(default_factory=list)

    # --- setup -------------------------------------------------------------------------
    def start(self) -> NetnsCluster:
        Path(LOCK_PATH).parent.mkdir(parents=True, exist_ok=True)
        self._lock = os.open(LOCK_PATH, os.O_CREAT | os.O_RDWR, 0o600)
        fcntl.flock(self._lock, fcntl.LOCK_EX)  # one such cluster on the subnet at a time
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.key = self.workdir / "id_ed25519"
        for stale in (self.key, self.key.with_suffix(".pub")):  # a previous rehearsal's key
            stale.unlink(missing_ok=True)
        for old in self.workdir.glob("h*/"):  # and its nodes' folders
            shutil.rmtree(old, ignore_errors=True)
        subprocess.run(
            [
                "ssh-keygen",
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-C",
                "pocforge-test",
                "-f",
                str(self.key),
            ],
            check=True,
        )
        (self.workdir / "authorized_keys").write_text(self.key.with_suffix(".pub").read_text())
        # sshd reads a user's keys as that user: a copy any account can read (the workdir
        # may sit under a private folder, as pytest's does), so a non-root user logs in too.
        self.keys_dir.mkdir(parents=True, exist_ok=True)
        self.keys_dir.chmod(0o755)
        shutil.copy(self.workdir / "authorized_keys", self.keys_dir / "authorized_keys")
        (self.keys_dir / "authorized_keys").chmod(0o644)
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege-separation dir

        bridge_ns = f"{self.tag}br"
        self._add_netns(bridge_ns)
        _ip("link", "add", "br0", "type", "bridge", netns=bridge_ns)
        _ip("link", "set", "br0", "up", netns=bridge_ns)
        ctl = f"{self.tag}c"
        _ip("link", "add", ctl, "type", "veth", "peer", "name", f"{self.tag}cb")
        self._made_links.append(ctl)
        self._attach(f"{self.tag}cb", bridge_ns)
        _ip("addr", "add", f"{CONTROLLER_IP}/24", "dev", ctl)
        _ip("link", "set", ctl, "up")

        for n in range(1, self.count + 1):
            host = Host(
                name=f"h{n}",
                netns=f"{self.tag}h{n}",
                address=f"{SUBNET}.{10 + n}",
                root=self.workdir / f"h{n}",
            )
            host.opt.mkdir(parents=True)
            self._add_netns(host.netns)
            outer, inner = f"{self.tag}h{n}b", f"{self.tag}h{n}e"
            _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
            self._attach(outer, bridge_ns)
            _ip("link", "set", inner, "netns", host.netns)
            _ip("link", "set", inner, "name", "eth0", netns=host.netns)
            _ip("addr", "add", f"{host.address}/24", "dev", "eth0", netns=host.netns)
            _ip("link", "set", "eth0", "up", netns=host.netns)
            _ip("link", "set", "lo", "up", netns=host.netns)
            self.hosts.append(host)
            self.start_sshd(host)
        for host in self.hosts:
            self.wait_ssh(host)
        return self

    def _add_netns(self, name: str) -> None:
        _ip("netns", "add", name)
        self._made_netns.append(name)
        _ip("link", "set", "lo", "up", netns=name)

    def _attach(self, link: str, bridge_ns: str) -> None:
        _ip("link", "set", link, "netns", bridge_ns)
        _ip("link", "set", link, "master", "br0", netns=bridge_ns)
        _ip("link", "set", link, "up", netns=bridge_ns)

    def start_sshd(self, host: Host) -> None:
        key = host.root / "ssh_host_ed25519_key"
        if not key.exists():
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True
            )
        private_tmp = host.root / "tmp"
        private_tmp.mkdir(exist_ok=True)
        private_tmp.chmod(0o1777)
        binds = []
        for folder in self._shared_under_tmp():
            inside = private_tmp / folder.relative_to("/tmp")
            inside.mkdir(parents=True, exist_ok=True)
            binds.append(f"mount --bind {folder} {inside}")
        config = host.root / "sshd_config"
        config.write_text(
            f"ListenAddress {host.address}\nPort 22\nHostKey {key}\n"
            f"PidFile {host.root / 'sshd.pid'}\n"
            f"AuthorizedKeysFile {self.keys_dir / 'authorized_keys'}\n"
            "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
            "Subsystem sftp internal-sftp\nMaxStartups 100\nMaxSessions 100\n"
        )
        # The shared folders are bound into the private /tmp first; --rbind carries them
        # along when it covers /tmp (all inside this mount namespace, invisible outside).
        script = " && ".join(
            [
                f"hostname {host.name}",
                # best effort: without them only containers fail, not the node
                *(f"({mount} 2>/dev/null || true)" for mount in cgroup_mounts()),
                f"mount --bind {host.opt} /opt",
                *binds,
                f"mount --rbind {private_tmp} /tmp",
                f"exec /usr/sbin/sshd -D -e -f {config}",
            ]
        )
        # ip netns exec and unshare both exec in place, so the Popen pid is sshd's pid.
        host.sshd = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                host.netns,
                "unshare",
                "--mount",
                "--uts",
                "--propagation",
                "private",
                "sh",
                "-c",
                script,
            ],
            stdout=subprocess.DEVNULL,
            stderr=open(host.root / "sshd.log", "ab"),  # noqa: SIM115
        )

    @property
    def keys_dir(self) -> Path:
        return Path("/run/pocforge-rehearse") / self.tag

    def _shared_under_tmp(self) -> list[Path]:
        """The shared folders that lie under /tmp, outermost only."""
        tmp = Path("/tmp").resolve()
        wanted = [Path(p).resolve() for p in (self.shared or (self.workdir.parent,))]
        # the workdir (sshd's files) and the kit (the CPU runtime's environments), which a
        # clone under /tmp (a CI checkout) would otherwise hide from the nodes
        wanted += [self.workdir.resolve(), kit_root().resolve()]
        under = sorted({p for p in wanted if p.is_relative_to(tmp) and p != tmp})
        return [p for p in under if not any(p != q and p.is_relative_to(q) for q in under)]

    def wait_ssh(self, host: Host, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if host.sshd is not None and host.sshd.poll() is not None:
                log = (host.root / "sshd.log").read_text(errors="replace")
                raise RuntimeError(f"sshd on {host.name} exited: {log[-500:]}")
            try:
                with socket.create_connection((host.address, 22), timeout=1) as conn:
                    if conn.recv(64).startswith(b"SSH-"):
                        return
            except OSError:
                time.sleep(0.1)
        raise TimeoutError(f"sshd on {host.name} ({host.address}) did not answer")

    def known_hosts(self, path: Path) -> Path:
        """A known-hosts file with every node's host key (``<address> <type> <key>``)."""
        lines = []
        for host in self.hosts:
            kind, key = (host.root / "ssh_host_ed25519_key.pub").read_text().split()[:2]
            lines.append(f"{host.address} {kind} {key}\n")
        path.write_text("".join(lines))
        return path

    # --- faults the tests inject -----------------------------------------------------------
    def rotate_host_key(self, host: Host) -> None:
        """Give ``host`` a new SSH host key (a reinstalled node, or a man in the middle)."""
        self.kill_sshd(host)
        for name in ("ssh_host_ed25519_key", "ssh_host_ed25519_key.pub"):
            (host.root / name).unlink(missing_ok=True)
        self.start_sshd(host)
        self.wait_ssh(host)

    def kill_sshd(self, host: Host) -> None:
        """Kill every process in the host's namespace (its sshd and its sessions)."""
        self._kill_netns_pids(host.netns)
        if host.sshd is not None:
            host.sshd.wait(timeout=10)
            host.sshd = None

    def processes(self, host: Host) -> dict[int, str]:
        """pid -> command line of every process inside the host's namespace."""
        out = _ip("netns", "pids", host.netns, check=False).stdout.split()
        found = {}
        for pid in (int(p) for p in out if p.isdigit()):
            with contextlib.suppress(OSError):
                raw = Path(f"/proc/{pid}/cmdline").read_bytes()
                found[pid] = raw.replace(b"\0", b" ").decode(errors="replace").strip()
        return found

    def inventory(self, path: Path, **group_vars) -> Path:
        """An Ansible inventory (YAML) of the hosts, reached as root with the fixture's key."""
        import yaml

        data = {
            "all": {
                "hosts": {h.name: {"ansible_host": h.address} for h in self.hosts},
                "vars": {
                    "ansible_user": "root",
                    "ansible_ssh_private_key_file": str(self.key),
                    "ansible_python_interpreter": "/usr/bin/python3",
                    # the nodes' keys are known (made here): checked strictly, as
                    # pocforge.cluster.known_hosts.policy_vars("strict", …) would
                    "ansible_host_key_checking": True,
                    "ansible_ssh_common_args": (
                        "-o StrictHostKeyChecking=yes -o HashKnownHosts=no "
                        f"-o UserKnownHostsFile={self.known_hosts(path.with_name(path.name + '.known_hosts'))}"
                    ),
                    **group_vars,
                },
            }
        }
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    # --- teardown ----------------------------------------------------------------------------
    def _kill_netns_pids(self, netns: str) -> None:
        for _ in range(50):
            out = _ip("netns", "pids", netns, check=False).stdout.split()
            pids = [int(p) for p in out if p.isdigit()]
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            for host in self.hosts:  # reap our own children so they do not linger as zombies
                if host.sshd is not None and host.sshd.pid in pids:
                    host.sshd.wait(timeout=10)
                    host.sshd = None
            time.sleep(0.05)

    def close(self) -> None:
        try:
            for name in reversed(self._made_netns):
                self._kill_netns_pids(name)
            for name in reversed(self._made_netns):
                _ip("netns", "del", name, check=False)
            for link in self._made_links:
                _ip("link", "del", link, check=False)
            self._made_netns.clear()
            self._made_links.clear()
            shutil.rmtree(self.keys_dir, ignore_errors=True)
        finally:
            if self._lock is not None:
                fcntl.flock(self._lock, fcntl.LOCK_UN)
                os.close(self._lock)
                self._lock = None

    def leftovers(self) -> list[str]:
        """Namespaces and links of this fixture that still exist (empty after close())."""
        names = _ip("netns", "list", check=False).stdout
        found = [
            line.split()[0]
            for line in names.splitlines()
            if line.split() and line.split()[0].startswith(self.tag)
        ]
        links = _ip("-o", "link", "show", check=False).stdout
        found += [f"link {self.tag}c" for line in links.splitlines() if f" {self.tag}c" in line]
        return found


@contextlib.contextmanager
def running_cluster(
    folder: Path, count: int, shared: tuple[Path, ...] = ()
) -> Iterator[NetnsCluster]:
    """``count`` namespaced hosts for the block; always torn down, and checked to be gone.
    ``shared``: folders under /tmp the nodes see at their paths (default: folder's parent)."""
    made = NetnsCluster(folder, count=count, shared=shared)
    try:
        made.start()
        yield made
    finally:
        made.close()
        assert made.leftovers() == [], "namespaces left behind"
