"""Real Ansible against three network-namespace hosts, each with its own sshd, through the
kit's driver (ansible-runner). One cluster for the module; it is torn down even on failure."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pocforge.cluster import ClusterExpectations, run_playbook
from pocforge.rehearse.nodes import missing_prerequisites, running_cluster

from ..conftest import REPO
from .fakes import fake_amd_smi

# the namespaced subnet (one cluster at a time) and podman's storage: one worker
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.shares("cluster")]

_why = missing_prerequisites()
if _why:
    pytest.skip(f"cluster hosts: {_why}", allow_module_level=True)

# Checks that depend on this machine's kernel tuning, not on the hosts: out of these tests.
NEUTRAL = {
    "preflight_kernel_cmdline_required": [],
    "preflight_disk_min_free_gb": 0,
}
AMD8 = ClusterExpectations(gpu_required=True, gpu_vendor="amd", gpu_model="MI300X", gpus_per_node=8)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with running_cluster(tmp_path_factory.mktemp("netns"), 3) as made:
        yield made


@pytest.fixture(scope="module")
def inventory(cluster, tmp_path_factory):
    return cluster.inventory(tmp_path_factory.mktemp("inv") / "hosts.yml", **NEUTRAL)


def _without_gpus(cluster) -> None:
    """Every host as the tests expect to find it and leave it: no GPU (no fake amd-smi)."""
    for host in cluster.hosts:
        shutil.rmtree(host.opt / "rocm", ignore_errors=True)


# `nsys --version` as NeSI's support page on GPUs shows it run on Mahuika
# (tests/data/README.md: profilers/nsys-version.txt)
NSYS_VERSION = (Path(__file__).parents[1] / "data" / "profilers" / "nsys-version.txt").read_text()
PROFILE_FIELD = "serving.workloads[chat].profile.tool"


def _podman(*args: str) -> subprocess.CompletedProcess:
    from pocforge.rehearse.image import engine_env

    return subprocess.run(
        ["podman", *args], capture_output=True, text=True, env=engine_env("podman")
    )


def _images(cluster, folder: Path) -> dict:
    """The images the shared bring-up is given: one saved to an archive on the controller and
    removed from podman (an air-gapped node's image), and the rehearsal image with a stand-in
    for Nsight Systems' CLI in it (it prints what the real one did)."""
    from pocforge.rehearse.image import build_image

    bare = build_image("podman")
    archived = f"localhost/pocforge-archive-test:{cluster.tag}"
    archive = folder / "image.tar"  # on the controller
    assert _podman("tag", bare, archived).returncode == 0
    assert _podman("save", "--quiet", "--output", str(archive), archived).returncode == 0
    assert _podman("rmi", archived).returncode == 0
    tool = folder / "nsys"
    tool.write_text(f"#!/bin/sh\nprintf '%s\\n' {NSYS_VERSION.strip()!r}\n")
    tool.chmod(0o755)
    with_nsys = f"localhost/pocforge-nsys-test:{cluster.tag}"
    made = _podman("create", "--name", f"nsys-{cluster.tag}", bare, "sh")
    assert made.returncode == 0, made.stderr
    try:
        assert _podman("cp", str(tool), f"nsys-{cluster.tag}:/bin/nsys").returncode == 0
        assert _podman("commit", "--quiet", f"nsys-{cluster.tag}", with_nsys).returncode == 0
    finally:
        _podman("rm", "--force", f"nsys-{cluster.tag}")
    return {"bare": bare, "archived": archived, "archive": archive, "with_nsys": with_nsys}


def _nsys_check(image: str | None) -> dict:
    """The check a profiled POC's launches ask of bring-up: nsys in ``image``, or (None) on
    the node's PATH."""
    engine = "podman" if image else None
    return {
        "tool": "nsys",
        "engine": engine,
        "image": image,
        "field": PROFILE_FIELD,
        "purpose": "the launches",
    }


VENV_PYTHON = "/opt/pocforge/venvs/probe/bin/python"


def _venv_and_weights(cluster) -> dict:
    """A venv runtime as bring-up makes it on a GPU node, here with no requirements (the
    nodes reach no registry): the kit's wheels built on this machine copied and installed
    with --no-index; and weights staged from a folder every node sees (the nodes' shared
    one, as an NFS mount) into its own /opt."""
    from pocforge.runtimes.provision import kit_wheels

    weights = cluster.shared_dir / "weights"
    weights.mkdir()
    (weights / "config.json").write_text('{"layers": 2}')
    (weights / "weights.bin").write_bytes(b"\0" * 4096)
    return {
        "model_staging_source": str(weights),
        "model_staging_dest": "/opt/models/tiny",
        "python_env_venvs": [
            {"name": "probe", "python": VENV_PYTHON, "create": True, "requirements": []}
        ],
        "python_env_wheels_dir": "/opt/pocforge/wheels",
        "python_env_wheels_src": str(kit_wheels()),
    }


@pytest.fixture(scope="module")
def brought_up(cluster, inventory, tmp_path_factory):
    """One bring-up and preflight of the three hosts that the tests below read, and a second
    bring-up of the same: every host with a scripted amd-smi of 8 MI300X (the first time), a
    framework venv and weights to stage; with podman, an image to load from its archive (its
    id pinned the second time) and a profiler (nsys) to find in an image. The hosts are left
    without a GPU, as the other tests expect them."""
    from pocforge.rehearse.image import podman_conf

    folder = tmp_path_factory.mktemp("bringup")
    images = _images(cluster, folder) if shutil.which("podman") else None
    try:
        extra = _venv_and_weights(cluster)
        if images:
            extra["container_image_images"] = [
                {"engine": "podman", "image": images["archived"], "archive": str(images["archive"])}
            ]
            # this machine's podman settings where the nodes see them (a site's /etc)
            extra["profiler_tools_env"] = {"CONTAINERS_CONF": str(podman_conf(cluster.site_dir))}
            extra["profiler_tools_checks"] = [_nsys_check(images["with_nsys"])]
        for host in cluster.hosts:
            fake_amd_smi(host.opt, 8)
        try:
            up = run_playbook("bringup.yml", inventory, folder, extravars=extra)
            check = run_playbook("preflight.yml", inventory, folder, AMD8)
        finally:
            _without_gpus(cluster)
        again = dict(extra)
        loaded = up.hosts["h1"].facts.get("container_image_data", {})
        if images and images["archived"] in loaded:  # the spec pins the loaded image's id
            image_id = loaded[images["archived"]].removeprefix("sha256:")
            again["container_image_images"] = [
                {**extra["container_image_images"][0], "id": image_id}
            ]
        second = run_playbook("bringup.yml", inventory, folder / "again", extravars=again)
        yield {"up": up, "check": check, "again": second, "images": images, "run_dir": folder}
    finally:
        if images:
            _podman("rmi", "--force", images["archived"], images["with_nsys"])


def _needs_podman(brought_up) -> dict:
    if brought_up["images"] is None:
        pytest.skip("podman is not installed (make setup installs it)")
    return brought_up["images"]


def test_bringup_and_preflight_report_each_hosts_own_facts(brought_up):
    """Every host answers for itself: its hostname and what its private /opt holds."""
    up, check = brought_up["up"], brought_up["check"]
    assert up.rc == 0, up.to_dict()
    assert set(check.hosts) == {"h1", "h2", "h3"}
    for name, host in check.hosts.items():
        assert host.facts["host_facts_data"]["hostname"] == name
        gpu = host.facts["gpu_stack_data"]
        assert (gpu["vendor"], gpu["count"], gpu["runtime_version"]) == ("amd", 8, "6.4.2-120")
        assert gpu["tool"] == "/opt/rocm/bin/amd-smi"
        assert host.checks["gpu_count"].status == "pass"
        assert host.checks["gpu_driver_version"].status == "pass"
        assert host.checks["reachable"].status == "pass"
    saved = brought_up["run_dir"] / "cluster" / "facts" / "h2.json"
    assert '"hostname": "h2"' in saved.read_text()
    assert (brought_up["run_dir"] / "cluster" / "ansible" / "preflight" / "job_events").is_dir()


def _ssh(cluster, host, command: str) -> str:
    done = cluster.ssh(host, command)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_each_host_has_a_private_tmp_and_sees_nothing_of_this_machine(cluster):
    """A file a node writes to /tmp stays on that node (not on the controller, not on the
    next node). The kit's checkout, its .venv, the Python behind it and the fixture's own
    folder do not exist on a node; the rehearsal's run folder (sshd's files, the nodes'
    key) does, as a site's /etc."""
    h1, h2, _ = cluster.hosts
    name = f"pocforge-private-{cluster.tag}"
    _ssh(cluster, h1, f"echo h1 > /tmp/{name}")
    assert not (Path("/tmp") / name).exists()
    assert (h1.root / "tmp" / name).read_text() == "h1\n"
    assert _ssh(cluster, h2, f"ls /tmp/{name} 2>/dev/null || echo absent").strip() == "absent"
    here = [REPO, REPO / ".venv", Path(sys.prefix), Path(sys.base_prefix), cluster.workdir]
    for path in here:
        assert path.exists()  # on the controller
    probe = "; ".join(f"test -e {shlex.quote(str(p))} && echo {shlex.quote(str(p))}" for p in here)
    assert _ssh(cluster, h2, f"{probe}; true").split() == []
    keys = cluster.site_dir / "authorized_keys"
    assert _ssh(cluster, h2, f"cat {keys}") == keys.read_text()


def test_bringup_loads_a_missing_image_from_its_archive_once(
    brought_up, cluster, inventory, tmp_path
):
    """An air-gapped node's image: absent, bring-up copies the archive from the controller
    and loads it (``podman load``), records its id; a second bring-up finds it and changes
    nothing, checking the id the spec pins (runtime.image_id): another id fails every node."""
    images = _needs_podman(brought_up)
    tag, archive = images["archived"], images["archive"]
    first = brought_up["up"]
    assert first.rc == 0, first.to_dict()
    assert _podman("image", "exists", tag).returncode == 0
    for host in cluster.hosts:  # copied into each node's own /opt (it lacked the image)
        assert (host.opt / "pocforge" / "images" / "image.tar").stat().st_size == (
            archive.stat().st_size
        )
    for host in first.hosts.values():
        # docker writes "sha256:<hex>", podman the hex alone
        image_id = host.facts["container_image_data"][tag].removeprefix("sha256:")
        assert len(image_id) == 64 and int(image_id, 16) >= 0
    # the spec pins the loaded image's id: the same passes, another fails each node
    second = brought_up["again"]
    assert {n: (h.status, h.changed_tasks) for n, h in second.hosts.items()} == {
        name: ("ok", []) for name in ("h1", "h2", "h3")
    }
    image = {"engine": "podman", "image": tag, "archive": str(archive)}
    wrong = [{**image, "id": "0" * 64}]
    refused = run_playbook(
        "bringup.yml", inventory, tmp_path, extravars={"container_image_images": wrong}
    )
    for host in refused.hosts.values():
        assert host.status == "failed" and "runtime.image_id" in host.error, host


def test_bringup_builds_a_framework_venv_with_the_kits_wheels_without_an_index(brought_up, cluster):
    """The venv is created, the kit's wheels are installed into it, its packages are in the
    facts, and the weights are staged into each node's private /opt; the second bring-up
    changes nothing."""
    for name in ("h1", "h2", "h3"):
        first, second = brought_up["up"].hosts[name], brought_up["again"].hosts[name]
        assert first.status == "ok", first.error
        envs = first.facts["python_env_data"]["envs"]
        assert envs["probe"]["pocforge"] == envs["probe"]["pocforge-kernels"] == "0.1.0"
        assert second.status == "ok" and second.changed_tasks == [], second
    for host in cluster.hosts:  # each node's private /opt received its own copy
        assert (host.opt / "models" / "tiny" / "weights.bin").stat().st_size == 4096
        site = next(
            (host.opt / "pocforge" / "venvs" / "probe" / "lib").glob("python3*/site-packages")
        )
        assert (site / "pocforge" / "frameworks" / "process.py").is_file()


def test_bringup_looks_for_each_gpu_profiler_where_its_launches_run_it(
    cluster, brought_up, inventory, tmp_path
):
    """A profiled POC's tool, looked for before any launch: nsys in the runtime's image (an
    image with it passes and its version is kept; the bare one fails every node, naming the
    image and the spec field), and on the nodes' PATH (where none has it: each node fails,
    saying what to install). Before the tests below, which take hosts away."""
    from pocforge.rehearse.image import podman_conf

    images = _needs_podman(brought_up)
    for host in brought_up["up"].hosts.values():
        (data,) = host.facts["profiler_tools_data"]
        assert data == {
            "tool": "nsys",
            "image": images["with_nsys"],
            "path": "/bin/nsys",
            "version": NSYS_VERSION.strip(),
        }
    refused = run_playbook(
        "bringup.yml",
        inventory,
        tmp_path,
        extravars={
            "profiler_tools_env": {"CONTAINERS_CONF": str(podman_conf(cluster.site_dir))},
            "profiler_tools_checks": [
                _nsys_check(images["bare"]),
                _nsys_check(None),
            ],
        },
    )
    bare = images["bare"]
    for name, host in refused.hosts.items():
        assert host.status == "failed", host
        assert f"nsys does not run in image {bare} on {name} (nsys: not found)" in host.error
        assert f"nsys does not run on {name} (nsys: not found)" in host.error
        assert f"{PROFILE_FIELD} asks for it" in host.error and "Nsight Systems" in host.error
        assert f"or set {PROFILE_FIELD} to torch" in host.error


def test_a_host_short_of_gpus_without_any_or_unreachable_fails_alone(cluster, inventory, tmp_path):
    """Required 8 MI300X: h2's amd-smi reports 7 GPUs and fails gpu_count naming 8 and 7, h3
    has no GPU and fails naming 8 and 0, h1 passes. Not required, no host with a GPU and h1's
    sshd killed: h1 is named unreachable, h2 and h3 complete every check, their GPU checks
    saying "skipped: no GPU". After the tests that need every host (the one below starts h1
    again)."""
    for host in cluster.hosts[:2]:
        fake_amd_smi(host.opt, 7 if host.name == "h2" else 8)
    try:
        strict = run_playbook("preflight.yml", inventory, tmp_path, AMD8)
    finally:  # the relaxed run's hosts have none
        _without_gpus(cluster)
    cluster.kill_sshd(cluster.hosts[0])
    relaxed = run_playbook("preflight.yml", inventory, tmp_path, ClusterExpectations())
    bad = strict.hosts["h2"].checks["gpu_count"]
    assert bad.status == "fail" and "expected 8, found 7" in bad.message
    assert strict.hosts["h2"].status == "failed"
    assert "gpu_count: expected 8, found 7" in strict.hosts["h2"].error
    assert "expected 8, found 0" in strict.hosts["h3"].checks["gpu_count"].message
    assert strict.hosts["h1"].checks["gpu_count"].status == "pass"
    assert sorted(f.host for f in strict.failures() if f.check == "gpu_count") == ["h2", "h3"]
    assert relaxed.hosts["h1"].status == "unreachable"
    rec = relaxed.hosts["h1"].checks["reachable"]
    assert rec.status == "fail" and rec.measured == "unreachable"
    for name in ("h2", "h3"):
        assert relaxed.hosts[name].status == "ok", relaxed.hosts[name].error
        assert "disk_free" in relaxed.hosts[name].checks
        rec = relaxed.hosts[name].checks["gpu_count"]
        assert rec.status == "skip" and rec.message == "gpu_count: skipped: no GPU"


def test_host_keys_are_trusted_on_first_use_and_a_changed_key_is_refused(cluster, tmp_path):
    """tofu records every node's key at first contact (readable, with its fingerprint);
    a node whose key then changes is refused, named with the file and the way to accept a
    legitimate new key, and the other nodes carry on; strict refuses a node not in the file.
    (A node an earlier test took down is started again first: one cluster per process.)"""
    from pocforge.cluster.known_hosts import fingerprints, policy_vars

    for host in cluster.hosts:
        if host.sshd is None:
            cluster.start_sshd(host)
            cluster.wait_ssh(host)
    inventory = cluster.inventory(tmp_path / "hosts.yml", **NEUTRAL)
    known = tmp_path / "known_hosts"
    known.touch()

    def teardown(policy):
        # no shared ControlPersist connection: every run makes its own SSH handshakes
        fresh = {**policy, "ansible_ssh_args": "-o ControlMaster=no -o LogLevel=ERROR"}
        return run_playbook("teardown.yml", inventory, tmp_path / "run", extravars=fresh)

    first = teardown(policy_vars("tofu", known))
    assert first.rc == 0, first.to_dict()
    recorded = fingerprints(known)
    assert sorted(f.host for f in recorded) == sorted(h.address for h in cluster.hosts)
    assert all(f.type == "ED25519" and f.sha256 for f in recorded)

    h1, h2, _ = cluster.hosts
    cluster.rotate_host_key(h2)
    again = teardown(policy_vars("tofu", known))
    assert again.hosts["h2"].status == "unreachable"
    error = again.hosts["h2"].error
    assert "SSH host key does not match" in error and str(known) in error
    assert f"ssh-keygen -R {h2.address} -f {known}" in error
    assert {again.hosts[n].status for n in ("h1", "h3")} == {"ok"}
    assert fingerprints(known) == recorded  # the changed key was not written over the old

    only_h1 = tmp_path / "strict_known_hosts"
    only_h1.write_text(
        next(line for line in known.read_text().splitlines(True) if h1.address in line)
    )
    strict = teardown(policy_vars("strict", only_h1))
    assert strict.hosts["h1"].status == "ok"
    for name in ("h2", "h3"):  # not in the file
        assert strict.hosts[name].status == "unreachable"
        assert "checked strictly" in strict.hosts[name].error
    assert only_h1.read_text().count("\n") == 1  # strict adds nothing

    # the rehearsal's way: the nodes' own keys written up front, then checked strictly
    seeded = teardown(policy_vars("strict", cluster.known_hosts(tmp_path / "seeded")))
    assert {h.status for h in seeded.hosts.values()} == {"ok"}, seeded.to_dict()
