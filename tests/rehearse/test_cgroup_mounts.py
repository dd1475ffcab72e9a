"""A rehearsal node mounts the host's cgroup hierarchies again (``ip netns exec`` hides
them behind a fresh sysfs, and runc then finds "no cgroup mount found in mountinfo"), read
from ``/proc/mounts`` lines of the two layouts hosts have."""

from __future__ import annotations

from pocforge.rehearse.nodes import cgroup_mounts

# This machine's layout (Debian 12 on a Firecracker VM, 2026-12-01): v1 controllers under
# a tmpfs, systemd's named hierarchy and a cgroup2 "unified" beside them.
HYBRID = """\
tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0
cgroup /sys/fs/cgroup/systemd cgroup rw,relatime,name=systemd 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
proc /proc proc rw,relatime 0 0
"""
# A current distribution (cgroup v2 only, systemd's default since 2021).
UNIFIED = "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime,nsdelegate 0 0\n"


def test_hybrid_hosts_get_the_tmpfs_then_each_controller():
    assert cgroup_mounts(HYBRID) == [
        "mount -t tmpfs -o mode=755 tmpfs /sys/fs/cgroup",
        "mkdir -p /sys/fs/cgroup/cpu",
        "mount -t cgroup -o cpu cgroup /sys/fs/cgroup/cpu",
        "mkdir -p /sys/fs/cgroup/memory",
        "mount -t cgroup -o memory cgroup /sys/fs/cgroup/memory",
        "mkdir -p /sys/fs/cgroup/systemd",
        "mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd",
        "mkdir -p /sys/fs/cgroup/unified",
        "mount -t cgroup2 cgroup2 /sys/fs/cgroup/unified",
    ]


def test_unified_hosts_get_one_cgroup2_mount():
    assert cgroup_mounts(UNIFIED) == [
        "mkdir -p /sys/fs/cgroup",
        "mount -t cgroup2 cgroup2 /sys/fs/cgroup",
    ]
