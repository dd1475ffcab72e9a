"""Collective bandwidth on CPU nodes: torch.distributed on gloo, reported as nccl-tests do.

What the collectives role runs where there is no GPU (a rehearsal's namespaced nodes, a
CPU POC): the same command line as ``<op>_perf`` of nccl-tests (``-b``, ``-e``, ``-f``,
``-g``, ``-n``, ``-w``), started the same way (alone within a node, one ``mpirun`` across
the nodes, ranks from Open MPI's ``OMPI_COMM_WORLD_RANK`` / ``OMPI_COMM_WORLD_SIZE``), and
the same table, so the role's parser, the checks and the dashboard read it unchanged.
The rendezvous is ``MASTER_ADDR:MASTER_PORT`` (the first node; the role exports both to
every rank); ``GLOO_SOCKET_IFNAME`` picks the link.

Bandwidths follow nccl-tests' definitions (its doc/PERFORMANCE.md): ``algbw = bytes /
time``; ``busbw = algbw * 2(n-1)/n`` for all_reduce and ``(n-1)/n`` for all_gather and
alltoall. Sizes are total bytes per rank's buffer, float32 elements. The numbers measure
gloo over the nodes' link: nothing about GPUs.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import sys
import time

OPS = ("all_reduce", "all_gather", "alltoall")
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def size_bytes(text: str) -> int:
    """``1M`` -> 1048576, as nccl-tests reads ``-b`` / ``-e``."""
    match = re.fullmatch(r"(\d+)([KMG]?)", text.strip().upper())
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (e.g. 1M, 64K, 1G)")
    return int(match.group(1)) * _UNITS[match.group(2)]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def bus_factor(op: str, ranks: int) -> float:
    if ranks <= 1:
        return 0.0
    return 2 * (ranks - 1) / ranks if op == "all_reduce" else (ranks - 1) / ranks


def sizes(low: int, high: int, factor: int) -> list[int]:
    out, size = [], low
    while size <= high:
        out.append(size)
        size *= max(factor, 2)
    return out


def _time_op(op: str, count: int, ranks: int, iters: int, warmup: int) -> float:
    """Seconds per call on this rank (the slowest rank's, as nccl-tests reports)."""
    import torch
    import torch.distributed as dist

    buffer = torch.ones(count, dtype=torch.float32)
    if op == "all_reduce":

        def call() -> None:
            dist.all_reduce(buffer)
    elif op == "all_gather":
        parts = [torch.empty(count // ranks or 1) for _ in range(ranks)]
        shard = buffer[: count // ranks or 1]

        def call() -> None:
            dist.all_gather(parts, shard)
    else:
        out = torch.empty_like(buffer)

        def call() -> None:
            dist.all_to_all_single(out, buffer)

    for _ in range(warmup):
        call()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        call()
    elapsed = torch.tensor([(time.perf_counter() - start) / iters])
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    return float(elapsed.item())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gloo_perf", description=__doc__.split("\n")[0])
    parser.add_argument("op", choices=OPS)
    parser.add_argument("-b", "--minbytes", type=size_bytes, default=size_bytes("1M"))
    parser.add_argument("-e", "--maxbytes", type=size_bytes, default=size_bytes("16M"))
    parser.add_argument("-f", "--stepfactor", type=int, default=2)
    parser.add_argument("-g", "--ngpus", type=int, default=1, help="ignored: one rank each")
    parser.add_argument("-n", "--iters", type=int, default=5)
    parser.add_argument("-w", "--warmup_iters", type=int, default=1)
    args = parser.parse_args(argv)

    import torch.distributed as dist

    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    ranks = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
    address = os.environ.get("MASTER_ADDR", "127.0.0.1")
    port = int(os.environ.get("MASTER_PORT", "29510"))
    if ranks == 1:  # within one node (no mpirun): its own rendezvous, not the first node's
        address, port = "127.0.0.1", _free_port()
    dist.init_process_group(
        "gloo", init_method=f"tcp://{address}:{port}", rank=rank, world_size=ranks
    )
    hosts = [None] * ranks
    dist.all_gather_object(hosts, (rank, socket.gethostname(), os.getpid()))
    rows = []
    for size in sizes(args.minbytes, args.maxbytes, args.stepfactor):
        count = size // 4
        seconds = _time_op(args.op, count, ranks, args.iters, args.warmup_iters)
        algbw = size / seconds / 1e9
        rows.append((size, count, seconds * 1e6, algbw, algbw * bus_factor(args.op, ranks)))
    dist.destroy_process_group()
    if rank != 0:
        return 0
    out = [
        "# pocforge gloo_perf: torch.distributed gloo on CPU, in nccl-tests' table",
        f"# Collective test starting: {args.op}_perf",
        f"# nThread 1 nGpus 1 minBytes {args.minbytes} maxBytes {args.maxbytes} "
        f"step: {args.stepfactor}(factor) warmup iters: {args.warmup_iters} iters: {args.iters}",
        "#",
        "# Using devices",
        *(
            f"#  Rank {r:2d} Group  0 Pid {pid:6d} on {host} device  0 [cpu] gloo"
            for r, host, pid in hosts
        ),
        "#",
        "#                                                              out-of-place"
        "                       in-place",
        "#       size         count      type   redop    root     time   algbw   busbw"
        "  #wrong     time   algbw   busbw  #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
        "             (us)  (GB/s)  (GB/s)",
    ]
    redop = "sum" if args.op == "all_reduce" else "none"
    for size, count, micros, algbw, busbw in rows:
        cells = f"{micros:8.1f} {algbw:7.2f} {busbw:7.2f} {0:7d}"
        out.append(f"{size:12d} {count:13d} {'float':>9} {redop:>7} {-1:7d} {cells} {cells}")
    average = sum(row[4] for row in rows) / len(rows) if rows else 0.0
    out += ["# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {average:.4f}", "#"]
    out.append(f"# Collective test concluded: {args.op}_perf")
    print("\n".join(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
