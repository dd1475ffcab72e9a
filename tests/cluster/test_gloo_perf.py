"""The kit's CPU collective benchmark: two real gloo ranks on this machine, started as
``mpirun`` would start them (Open MPI's rank variables), print nccl-tests' table, which the
collectives role's own parser reads into the same checks as a GPU run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pocforge.cluster.gloo_perf import bus_factor, size_bytes, sizes
from pocforge.frameworks.process import free_port

pytestmark = pytest.mark.process

PLUGINS = (
    Path(__file__).resolve().parents[2] / "playbooks" / "roles" / "collectives" / "filter_plugins"
)


def test_sizes_and_bus_factors_follow_nccl_tests():
    assert size_bytes("1M") == 1 << 20 and size_bytes("64K") == 65536
    assert sizes(size_bytes("1M"), size_bytes("4M"), 2) == [1 << 20, 2 << 20, 4 << 20]
    assert bus_factor("all_reduce", 2) == 1.0 and bus_factor("all_reduce", 4) == 1.5
    assert bus_factor("all_gather", 4) == 0.75 and bus_factor("alltoall", 1) == 0.0


@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "alltoall"])
def test_two_ranks_print_a_table_the_roles_parser_reads(op):
    sys.path.insert(0, str(PLUGINS))
    try:
        from nccl_tests import collective_checks, parse_nccl_tests
    finally:
        sys.path.remove(str(PLUGINS))
    port = str(free_port())
    argv = [sys.executable, "-m", "pocforge.cluster.gloo_perf", op, "-b", "64K", "-e", "256K"]
    ranks = [
        subprocess.Popen(
            argv,
            env={
                **os.environ,
                "MASTER_PORT": port,
                "OMPI_COMM_WORLD_RANK": str(rank),
                "OMPI_COMM_WORLD_SIZE": "2",
            },
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in (0, 1)
    ]
    outputs = [rank.communicate(timeout=120)[0] for rank in ranks]
    assert [rank.returncode for rank in ranks] == [0, 0], outputs
    assert outputs[1] == ""  # rank 0 prints, as nccl-tests under mpirun
    parsed = parse_nccl_tests(outputs[0])
    assert parsed["op"] == op and parsed["nranks"] == 2
    assert [row["size"] for row in parsed["rows"]] == [65536, 131072, 262144]
    assert parsed["peak_busbw"] > 0 and parsed["wrong_total"] == 0
    checks = {c["check"]: c for c in collective_checks(parsed, None, 0.95, "inter_node", "cpu")}
    assert checks[f"{op}_inter_busbw"]["skip"] == f"no busbw reference for cpu inter_node {op}"
    assert checks[f"{op}_inter_wrong"]["measured"] == 0


def test_one_rank_within_a_node_needs_no_rendezvous_at_the_first_node():
    """Within a node the role runs the tool alone, with the first node's MASTER_ADDR in its
    environment (for the run across nodes): a lone rank must not wait on that address."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pocforge.cluster.gloo_perf",
            "all_reduce",
            "-b",
            "64K",
            "-e",
            "64K",
        ],
        env={**os.environ, "MASTER_ADDR": "198.51.100.99", "MASTER_PORT": "29510"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "#  Rank  0 Group  0" in done.stdout and "Avg bus bandwidth" in done.stdout
