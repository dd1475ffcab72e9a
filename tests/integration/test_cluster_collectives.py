"""collectives.yml end to end on two network-namespace hosts through the kit's driver: the
role runs prebuilt ``<op>_perf`` binaries (``collectives_bin_dir``), within each node and
across both with a real Open MPI ``mpirun`` that starts its ranks on the other host over
SSH; the verdicts and the results store's documents come out of the real outputs the
binaries print. No GPU is involved: each host's private /opt holds a scripted amd-smi
(8 MI300X) and scripted ``<op>_perf`` executables that print a saved, real rccl-tests /
nccl-tests output (tests/data/collectives, sources in tests/data/README.md)."""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from pocforge.cluster import ClusterExpectations, collective_references, run_playbook_stage
from pocforge.rehearse.nodes import missing_prerequisites, running_cluster
from pocforge.results.store import RunStore

from .fakes import fake_amd_smi

# the namespaced subnet (one cluster at a time) and podman's storage: one worker
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.shares("cluster")]

_why = missing_prerequisites() or (None if shutil.which("mpirun") else "mpirun not installed")
if _why:
    pytest.skip(f"cluster collectives: {_why}", allow_module_level=True)

DATA = Path(__file__).resolve().parents[1] / "data" / "collectives"
POCFORGE = str(Path(sys.executable).parent / "pocforge")
BIN = "/opt/rccl-tests/build"  # a customer's preinstalled rccl-tests, inside each host's /opt
NEUTRAL = {"preflight_kernel_cmdline_required": [], "preflight_disk_min_free_gb": 0}
# Per host and collective: (output printed within the node, output printed across nodes).
HEALTHY = {
    "all_reduce": (
        "rccl_all_reduce_mi300x_1node_8gpu.txt",
        "rccl_all_reduce_mi300x_2node_16gpu.txt",
    ),
    "all_gather": ("nccl_all_gather_gb10_2node_2gpu.txt", "nccl_all_gather_gb10_2node_2gpu.txt"),
    "alltoall": ("rccl_alltoall_mi355x_1node_8gpu.txt", "rccl_alltoall_mi355x_1node_8gpu.txt"),
}
# h2 is degraded: its all_reduce is the real MI300X VF run with NUMA balancing on (293 GB/s).
DEGRADED = {
    **HEALTHY,
    "all_reduce": ("rccl_all_reduce_mi300x_vf_1node_8gpu.txt", HEALTHY["all_reduce"][1]),
}
MI300X = ClusterExpectations(
    gpu_required=True,
    gpu_vendor="amd",
    gpu_model="MI300X",
    gpus_per_node=8,
    platform="MI300X roce-400g",
    collective_reference=collective_references("MI300X", "roce-400g"),
)


def scripted_tests(opt: Path, outputs: dict[str, tuple[str, str]]) -> None:
    """``<op>_perf`` that log their rank and arguments, and print a saved output: rank 0
    only, like the real tests (under mpirun the other ranks print nothing). The outputs are
    copied beside them: a node sees nothing of this checkout."""
    folder = opt / "rccl-tests" / "build"
    folder.mkdir(parents=True, exist_ok=True)
    for name in {name for pair in outputs.values() for name in pair}:
        shutil.copy(DATA / name, folder / name)
    for op, (intra, inter) in outputs.items():
        tool = folder / f"{op}_perf"
        tool.write_text(
            textwrap.dedent(f"""\
            #!/bin/sh
            echo "rank=${{OMPI_COMM_WORLD_RANK:-none}} size=${{OMPI_COMM_WORLD_SIZE:-none}} $*" \\
                >> {BIN}/calls.log
            [ "${{OMPI_COMM_WORLD_RANK:-0}}" = 0 ] || exit 0
            if [ -n "$OMPI_COMM_WORLD_SIZE" ]; then exec cat {BIN}/{inter}; fi
            exec cat {BIN}/{intra}
            """)
        )
        tool.chmod(tool.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with running_cluster(tmp_path_factory.mktemp("netns"), 2) as made:
        yield made


def test_collectives_judge_each_host_and_feed_the_dashboard(cluster, tmp_path):
    """h2's all_reduce (293.07 GB/s) fails against 95% of the MI300X reference naming the
    host, the collective, the busbw and the threshold; h1 passes; mpirun spans both hosts;
    the run holds one CollectiveResult per run and the health matrix, and its dashboard
    shows both."""
    for host in cluster.hosts:
        fake_amd_smi(host.opt, 8)
        scripted_tests(host.opt, DEGRADED if host.name == "h2" else HEALTHY)
    inventory = cluster.inventory(tmp_path / "hosts.yml", **NEUTRAL)
    ssh = f"-i {cluster.key} -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"
    extra = {
        "collectives_bin_dir": BIN,
        "collectives_output_dir": "/opt/pocforge/results/collectives",
        # 2 cores: 16 ranks oversubscribe them; ssh with the fixture's key; the hosts' NIC.
        "collectives_mpirun_args": "--allow-run-as-root --oversubscribe --bind-to none",
        "collectives_env": {
            "OMPI_MCA_plm_rsh_args": f"{ssh} -o LogLevel=ERROR",
            "OMPI_MCA_oob_tcp_if_include": "eth0",
            "OMPI_MCA_btl_tcp_if_include": "eth0",
        },
    }
    run = RunStore(tmp_path / "results").create(poc="coll")
    result = run_playbook_stage(run, "collectives.yml", inventory, MI300X, extravars=extra)
    run.finish()

    h1, h2 = result.hosts["h1"], result.hosts["h2"]
    assert h1.status == "ok", h1.error
    bad = h2.checks["all_reduce_intra_busbw"]
    assert (bad.host, bad.status, bad.measured, bad.threshold) == ("h2", "fail", 293.07, ">= 300.1")
    assert bad.message.startswith("all_reduce_intra_busbw: expected >= 300.1 GB/s, found 293.07")
    assert "95% of the 315.9 GB/s reference" in bad.message
    assert h2.status == "failed" and "all_reduce_intra_busbw" in h2.error
    assert [(f.host, f.check) for f in result.failures()] == [("h2", "all_reduce_intra_busbw")]
    good = h1.checks["all_reduce_intra_busbw"]
    assert (good.status, good.measured, good.threshold) == ("pass", 315.91, ">= 300.1")
    skipped = h1.checks["alltoall_intra_busbw"]
    assert skipped.status == "skip"
    assert "no busbw reference for MI300X roce-400g intra_node alltoall" in skipped.message
    for host in (h1, h2):  # the run across nodes: the 2-node MI300X output, judged on both
        inter = host.checks["all_reduce_inter_busbw"]
        assert (inter.status, inter.measured, inter.threshold) == (
            "pass",
            357.46,
            f">= {round(357.5 * 0.95, 2):g}",
        )
        assert all(host.checks[f"{op}_intra_wrong"].status == "pass" for op in HEALTHY)

    # Within each node: one process with -g 8; across nodes: 16 ranks, 8 of them on h2.
    h1_calls = (cluster.hosts[0].opt / "rccl-tests" / "build" / "calls.log").read_text()
    h2_calls = (cluster.hosts[1].opt / "rccl-tests" / "build" / "calls.log").read_text()
    assert "rank=none size=none -b 1M -e 8G -f 2 -g 8" in h2_calls
    ranks_on_h2 = {line.split()[0] for line in h2_calls.splitlines() if "size=16" in line}
    assert ranks_on_h2 == {f"rank={r}" for r in range(8, 16)}
    assert "rank=0 size=16" in h1_calls

    # The results store: a table per run, the raw text beside it, the health matrix.
    folder = run.path / "collectives"
    assert sorted(p.name for p in folder.glob("*.json")) == sorted(
        [f"{h}-{op}-intra_node.json" for h in ("h1", "h2") for op in HEALTHY]
        + [f"{op}-inter_node.json" for op in HEALTHY]
    )
    degraded = json.loads((folder / "h2-all_reduce-intra_node.json").read_text())
    assert (
        degraded["rows"][-1]["bytes"] == 134217728 and degraded["rows"][-1]["busbw_gbs"] == 293.07
    )
    assert len(degraded["rows"]) == 25  # every message size, 8 B to 128 MiB
    assert (folder / "raw" / "h2-all_reduce-intra_node.txt").read_text() == (
        DATA / DEGRADED["all_reduce"][0]
    ).read_text()
    health = json.loads((run.path / "cluster" / "health.json").read_text())
    cell = next(
        c for c in health["checks"] if (c["host"], c["check"]) == ("h2", "all_reduce_intra_busbw")
    )
    assert (cell["status"], cell["value"]) == ("fail", "293.07 GB/s")
    # the hosts' own facts joined the provenance (GPU count from each host's amd-smi)
    provenance = json.loads((run.path / "provenance.json").read_text())
    ansible = {h["hostname"]: h for h in provenance["hosts"] if h["source"] == "ansible"}
    assert set(ansible) == {"h1", "h2"} and len(ansible["h2"]["gpus"]) == 8

    from pocforge.report.render import build, render_html

    context = build(run.path)
    (section,) = [s for s in context["sections"] if s.id == "cluster"]
    assert section.body["matrix"]["hosts"] == ["h1", "h2"]
    assert "all_reduce_intra_busbw" in section.body["matrix"]["checks"]
    assert [c.id for c in section.charts] == ["collectives"]
    page = render_html(context)
    assert "Host × check health" in page and "Collective bus bandwidth" in page
    verify = subprocess.run(
        [POCFORGE, "results", "verify", str(run.path)], capture_output=True, text=True
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr


def spec_workspace(root: Path, name: str) -> Path:
    """A folder with ``pocs/<name>/poc.yaml``: a one-node CPU POC (its cluster checks only)."""
    spec = {
        "poc": {"name": name, "customer": "pocforge tests", "owner": "tests"},
        "model": {"id": "model", "served_name": "tiny", "tiny": {"arch": "llama"}},
        "cluster": {"gpu": "cpu", "gpus_per_node": 1},
        "serving": {
            "framework": "vllm",
            "workloads": [
                {
                    "name": "chat",
                    "dataset": {"kind": "random", "isl": 8, "osl": 8},
                    "load": {"concurrency": [1]},
                    "num_prompts": 2,
                }
            ],
        },
    }
    folder = root / "pocs" / name
    folder.mkdir(parents=True)
    (folder / "poc.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return root


def test_cluster_check_cli_writes_a_run_the_dashboard_shows(cluster, tmp_path):
    """``pocforge cluster check`` against the hosts: a store run whose dashboard holds the
    host x check matrix; a failed check exits 1 and names host, check, value, threshold."""
    for host in cluster.hosts:
        shutil.rmtree(host.opt / "rocm", ignore_errors=True)
    root = spec_workspace(tmp_path, "clus")
    # h2 must keep 10**6 GB free: it cannot, so disk_free fails there and only there.
    inventory = cluster.inventory(tmp_path / "hosts.yml", **NEUTRAL)
    data = yaml.safe_load(inventory.read_text())
    data["all"]["hosts"]["h2"]["preflight_disk_min_free_gb"] = 10**6
    inventory.write_text(yaml.safe_dump(data))
    done = subprocess.run(
        [POCFORGE, "cluster", "check", "clus", "--inventory", str(inventory), "--run-id", "r1"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert "FAIL h2: disk_free: expected >= 1000000 GB, found" in done.stdout
    run = root / "results" / "clus" / "r1"
    manifest = json.loads((run / "run.json").read_text())
    assert (
        manifest["status"] == "complete" and manifest["stages"]["cluster"]["status"] == "complete"
    )
    assert "cluster/health.json" in manifest["files"]

    from pocforge.report.render import build, render_html

    context = build(run)
    (section,) = [s for s in context["sections"] if s.id == "cluster"]
    matrix = section.body["matrix"]
    assert matrix["hosts"] == ["h1", "h2"]
    assert matrix["cells"][("h2", "disk_free")].status == "fail"
    assert matrix["cells"][("h1", "disk_free")].status == "pass"
    assert matrix["cells"][("h1", "gpu_count")].status == "skip"
    assert "Host × check health" in render_html(context)
