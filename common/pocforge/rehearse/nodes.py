"""N throwaway nodes on this machine: network namespaces, each with a real sshd.

What ``pocforge rehearse`` runs a POC against before the customer's cluster (as Ansible's
molecule does for roles), and what the cluster tests use.

Layout (``tag`` is unique per fixture): a bridge namespace ``<tag>br`` holds bridge ``br0``;
every host namespace ``<tag>hN`` has ``eth0`` = 198.51.100.(10+N)/24 on a veth into that
bridge; the controller (this process, root namespace) reaches them through one more veth,
``<tag>c`` = 198.51.100.254/24. Each sshd runs inside its host's namespace and in its own
mount and UTS namespaces: its own hostname and disk, bind mounts of ``<workdir>/hN``'s
``opt``, ``tmp`` and ``root`` over ``/opt``, ``/tmp`` and ``/root``. A node is as bare as a
customer's: its OS is this machine's (``/usr``, ``/etc``, Debian's Python), but it sees
nothing of the controller's: the kit's checkout, the workspace and the interpreter behind
the kit's ``.venv`` are covered by empty read-only file systems (:func:`hidden_paths`: the
checkout's parent, so its path does not exist there),
nothing of the controller's ``/tmp`` or ``/root`` is there, and what a launch runs came
through bring-up under ``/opt/pocforge``. The rehearsal's own files a node needs (sshd's
configuration and keys, the nodes' SSH key, a Slurm site's files) are in a site folder,
``/run/pocforge-rehearse/<tag>`` (:attr:`NetnsCluster.site_dir`), as a site's ``/etc`` holds
them. Traffic goes only to these
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
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pocforge.paths import kit_root, workspace_root

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


# Installs of Python that are the OS's own, which a node has too: never covered.
_OS_PREFIXES = (Path("/usr"), Path("/usr/local"))


def hidden_paths() -> list[Path]:
    """What of the controller a node must not see, outermost only: the folders holding the
    kit's checkout and the workspace (so neither path exists on a node), the kit's
    environment and the Python install behind it (unless the OS's own). Those under
    ``/tmp`` and ``/root`` are gone with the node's own."""
    own = (Path("/tmp"), Path("/root"))
    folders = [Path(p).resolve().parent for p in (kit_root(), workspace_root())]
    wanted = {p for p in folders if p != Path("/")}
    wanted |= {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()} - set(_OS_PREFIXES)
    wanted = {p for p in wanted if p.exists() and not any(p.is_relative_to(o) for o in own)}
    return sorted(p for p in wanted if not any(p != q and p.is_relative_to(q) for q in wanted))


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
    root: Path  # this host's disk: opt/, tmp/, root/ (its /root)
    run: Path  # sshd's configuration, host key and pid, where the node's sshd reads them
    sshd: subprocess.Popen | None = None

    @property
    def opt(self) -> Path:
        return self.root / "opt"


@dataclass
class NetnsCluster:
    workdir: Path
    count: int = 3
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
        for old in self.workdir.glob("h*/"):  # a previous rehearsal's nodes' folders
            shutil.rmtree(old, ignore_errors=True)
        # the nodes' SSH key: the controller logs in with it, and a node reaches another
        # with it (mpirun), so it is in the site folder the nodes see
        shutil.rmtree(self.site_dir, ignore_errors=True)
        self.site_dir.mkdir(parents=True, mode=0o755)
        self.key = self.site_dir / "id_ed25519"
        self.shared_dir.mkdir(mode=0o1777)
        self.shared_dir.chmod(0o1777)
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
        # sshd reads a user's keys as that user: a file any account can read, so a non-root
        # user logs in too.
        (self.site_dir / "authorized_keys").write_text(self.key.with_suffix(".pub").read_text())
        (self.site_dir / "authorized_keys").chmod(0o644)
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
                run=self.site_dir / f"h{n}",
            )
            host.opt.mkdir(parents=True)
            host.run.mkdir()
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
        key = host.run / "ssh_host_ed25519_key"
        if not key.exists():
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True
            )
        for name, mode in (("tmp", 0o1777), ("root", 0o700)):
            (host.root / name).mkdir(exist_ok=True)
            (host.root / name).chmod(mode)
        config = host.run / "sshd_config"
        config.write_text(
            f"ListenAddress {host.address}\nPort 22\nHostKey {key}\n"
            f"PidFile {host.run / 'sshd.pid'}\n"
            f"AuthorizedKeysFile {self.site_dir / 'authorized_keys'}\n"
            "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
            "Subsystem sftp internal-sftp\nMaxStartups 100\nMaxSessions 100\n"
        )
        # The node's disk first (its binds come from the controller's paths, which the
        # covers that follow hide), then the covers: empty, read-only file systems.
        script = " && ".join(
            [
                f"hostname {host.name}",
                # best effort: without them only containers fail, not the node
                *(f"({mount} 2>/dev/null || true)" for mount in cgroup_mounts()),
                f"mount --bind {host.opt} /opt",
                f"mount --bind {host.root / 'root'} /root",
                f"mount --bind {host.root / 'tmp'} /tmp",  # last: the sources may be under /tmp
                *(f"mount -t tmpfs -o ro,size=4k,mode=755 hidden {p}" for p in hidden_paths()),
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
    def site_dir(self) -> Path:
        """The rehearsal's site folder, which every node sees at its path (a site's ``/etc``)."""
        return Path("/run/pocforge-rehearse") / self.tag

    @property
    def shared_dir(self) -> Path:
        """The one folder every node shares, as a customer's nodes share an NFS mount (vLLM's
        ExampleConnector passes the KV through it)."""
        return self.site_dir / "shared"

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

    def ssh(self, host: Host, command: str) -> subprocess.CompletedProcess:
        """``command`` run on ``host`` as root over its sshd (what the node itself sees)."""
        argv = ["ssh", "-i", str(self.key), "-o", "StrictHostKeyChecking=no"]
        argv += ["-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR"]
        return subprocess.run(
            [*argv, f"root@{host.address}", command], capture_output=True, text=True, timeout=30
        )

    def known_hosts(self, path: Path) -> Path:
        """A known-hosts file with every node's host key (``<address> <type> <key>``)."""
        lines = []
        for host in self.hosts:
            kind, key = (host.run / "ssh_host_ed25519_key.pub").read_text().split()[:2]
            lines.append(f"{host.address} {kind} {key}\n")
        path.write_text("".join(lines))
        return path

    # --- faults the tests inject -----------------------------------------------------------
    def rotate_host_key(self, host: Host) -> None:
        """Give ``host`` a new SSH host key (a reinstalled node, or a man in the middle)."""
        self.kill_sshd(host)
        for name in ("ssh_host_ed25519_key", "ssh_host_ed25519_key.pub"):
            (host.run / name).unlink(missing_ok=True)
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
            shutil.rmtree(self.site_dir, ignore_errors=True)
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
def running_cluster(folder: Path, count: int) -> Iterator[NetnsCluster]:
    """``count`` namespaced hosts for the block; always torn down, and checked to be gone."""
    made = NetnsCluster(folder, count=count)
    try:
        made.start()
        yield made
    finally:
        made.close()
        assert made.leftovers() == [], "namespaces left behind"
