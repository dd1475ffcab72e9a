"""DeepEP and MoRI expert-parallel all-to-all benchmark output -> EpAllToAllResult.

Reads what the benchmarks print, whichever of them printed it (``--format deepep`` and
``--format mori`` both come here; the lines say which):

- DeepEP ``tests/test_intranode.py`` / ``test_internode.py`` (``tests/legacy/`` since
  EPv2; ROCm/DeepEP prints the same): the ``[tuning]`` sweep lines and the ``[tuning] Best
  dispatch (FP8|BF16)`` / ``Best combine`` lines, in each of the formats DeepEP has printed
  (``: X GB/s (RDMA), Y GB/s (NVL)``; intranode ``…, T us`` / ``t: T us``; internode
  ``N + T us, …``), and the ``[config]`` line. A sweep line belongs to the Best line after it
  (the test prints a sweep, then its best); sweep lines after the last Best line are left out
  with a note, their phase unsaid.
- DeepEP ``tests/test_low_latency.py``: ``[rank N] Dispatch + combine bandwidth``, ``[rank N]
  Dispatch bandwidth … | Combine bandwidth …`` and ``[rank N] Dispatch send/recv time: S + R
  us | …``.
- MoRI ``tests/python/ops/bench_dispatch_combine.py`` (within a node): the ``Benchmarking
  with dispatch_block_num=…`` banner and the ``Round i duration(us) […] bandwidth(GB/s) […]
  avg bytes(MB) … lat L bw X / Y`` lines under ``Dispatch result:`` / ``Combine result:``,
  and ``Round i e2e(us) […]``; ``examples/ops/dispatch_combine/test_dispatch_combine_internode.py``
  (across nodes): its ``Dispatch Performance (dtype)`` / ``Combine Performance`` tables.

Other lines (NCCL / NVSHMEM logs, ``[testing] … passed``) are skipped. What each number
means is :class:`~pocforge.results.ep_schema.EpAllToAllResult`'s docstring and, per benchmark,
``DEFINITIONS`` (written into the result).
"""

from __future__ import annotations

import re
from pathlib import Path

from pocforge.results.ep_schema import EpAllToAllResult, EpConfig, EpRow
from pocforge.results.importers.common import Imported, ResultImportError

_F = r"([0-9]+(?:\.[0-9]+)?)"

_TUNING = re.compile(
    r"\[tuning\]\s+(?:Best\s+(dispatch|combine)(?:\s*\((FP8|BF16)\))?:\s*)?"
    r"SMs\s+(\d+),\s*NVL chunk\s+(\d+|default)(?:,\s*RDMA chunk\s+(\d+))?(.*)$"
)
_GBS = re.compile(rf"{_F}\s*GB/s\s*\((RDMA|NVL|XGMI)\)")
_NOTIFY_PLUS = re.compile(rf"{_F}\s*\+\s*{_F}\s*us")
_T = re.compile(rf"(?:\bt|avg_t):\s*{_F}\s*us")
_TRAILING_US = re.compile(rf",\s*{_F}\s*us\s*$")
_CONFIG = re.compile(r"\[config\]\s+(.*)$")

_RANK = r"\[rank\s+(\d+)\]\s+"
_LL_BOTH = re.compile(
    rf"{_RANK}Dispatch \+ combine bandwidth:\s*{_F}\s*GB/s,\s*"
    rf"avg_t={_F}\s*us,\s*min_t={_F}\s*us,\s*max_t={_F}\s*us"
)
_LL_EACH = re.compile(
    rf"{_RANK}Dispatch bandwidth:\s*{_F}\s*GB/s,\s*avg_t={_F}\s*us\s*\|\s*"
    rf"Combine bandwidth:\s*{_F}\s*GB/s,\s*avg_t={_F}\s*us"
)
_LL_HOOK = re.compile(
    rf"{_RANK}Dispatch send/recv time:\s*{_F}\s*\+\s*{_F}\s*us\s*\|\s*"
    rf"Combine send/recv time:\s*{_F}\s*\+\s*{_F}\s*us"
)

_MORI_BANNER = re.compile(
    r"Benchmarking with dispatch_block_num=(\d+),\s*dispatch_warp_per_block=(\d+),?\s*"
    r"combine_block_num=(\d+),\s*combine_warp_per_block=(\d+)"
)
_MORI_SECTION = re.compile(r"^(Dispatch|Combine|End-to-end) result:")
_MORI_ROUND = re.compile(
    r"^Round\s+(\d+)\s+duration\(us\)\s+\[([^\]]*)\]\s+bandwidth\(GB/s\)\s+\[([^\]]*)\]\s+"
    rf"avg bytes\(MB\)\s+{_F}\s+lat\s+{_F}\s+bw\s+{_F}\s*/\s*{_F}"
)
_MORI_E2E = re.compile(r"^Round\s+(\d+)\s+e2e\(us\)\s+\[([^\]]*)\]")
_MORI_TITLE = re.compile(r"^\|\s*(Dispatch|Combine) Performance(?:\s*\((\w+)\))?\s*\|\s*$")
_MORI_ROW = re.compile(r"^\|\s*(Best|Worst|Average)\s*\|(.*)\|\s*$")
_MORI_COLUMNS = {
    "RDMA Bandwidth (GB/s)": "rdma",
    "XGMI Bandwidth (GB/s)": "xgmi",
    "LL Bandwidth (GB/s)": "ll",
}
_PRECISION = {
    "FP8": "fp8",
    "BF16": "bf16",
    "bfloat16": "bf16",
    "float8_e4m3fnuz": "fp8",
    "float8_e4m3fn": "fp8",
}

DEFINITIONS = {
    "deepep-intranode": {
        "nvl_gbs": "bytes this rank received (recv_x.numel() * 2 for BF16, x (1 + 4/128)/2 for "
        "FP8 with its scales; combine sends the same back) / time; ROCm/DeepEP prints its "
        "XGMI figure under the same (NVL) label",
        "time_us": "bench(): mean CUDA-event time around the dispatch (combine) call",
    },
    "deepep-internode": {
        "rdma_gbs": "num_rdma_token_sent x hidden x 2 (x (1 + 4/128)/2 for FP8) / t, the token "
        "count being (token, destination node) pairs including the local node (algorithm "
        "bandwidth: the wire carries (nodes-1)/nodes of it)",
        "nvl_gbs": "bytes this rank received (recv_x.numel() * 2, FP8-scaled likewise) / t",
        "time_us": "t: the dispatch/combine kernel's Kineto time; notify_us the notify kernel's",
    },
    "deepep-low-latency": {
        "total_gbs": "every (token, top-k expert) copy (FP8 dispatch: hidden + hidden/128*4 + 16 "
        "bytes; BF16, or LogFMT with --use-logfmt, combine) / time, whichever link carried it",
        "time_us": "dispatch+combine: CUDA-event mean over iterations (min/max beside it); "
        "dispatch, combine: Kineto kernel time; send_us/recv_us: the same with the receive "
        "hook, send and receive kernels apart",
    },
    "mori-intranode": {
        "xgmi_gbs": "tokens this rank received x hidden x element size / the phase's CUDA-event "
        "time (mean over graph replays), the round's value being the mean over ranks",
        "ll_gbs": "xgmi_gbs x max tokens x top-k / tokens received (every copy counted, as "
        "low-latency kernels move them)",
        "time_us": "the round's mean over ranks of the phase time; dispatch+combine: one "
        "full-graph replay, mean over ranks (taken here, MoRI prints the per-rank list)",
    },
    "mori-internode": {
        "rdma_gbs": "(token, destination node) pairs x hidden x element size / time, as DeepEP "
        "counts them",
        "xgmi_gbs": "tokens this rank received x hidden x element size / time",
        "ll_gbs": "xgmi_gbs scaled to every (token, expert) copy",
        "summary": "Best: highest bandwidth, lowest latency over rounds x ranks; Worst the "
        "reverse; Average the mean",
    },
}


def _floats(text: str) -> list[float]:
    return [float(v) for v in text.split(",") if v.strip()]


def _precision(text: str | None) -> str | None:
    return _PRECISION.get(text) if text else None


def _tuning_row(m: re.Match[str]) -> EpRow:
    best_phase, precision, sms, nvl, rdma, rest = m.groups()
    gbs = {link.lower(): float(v) for v, link in _GBS.findall(rest)}
    time_us = notify_us = None
    if plus := _NOTIFY_PLUS.search(rest):
        notify_us, time_us = float(plus.group(1)), float(plus.group(2))
    elif t := _T.search(rest) or _TRAILING_US.search(rest):
        time_us = float(t.group(1))
    default = nvl == "default"
    config = EpConfig(
        sms=int(sms),
        nvl_chunk=None if default else int(nvl),
        rdma_chunk=int(rdma) if rdma else None,
        default=default,
    )
    return EpRow(
        phase=best_phase or "dispatch",
        precision=_precision(precision),
        summary="best" if best_phase else None,
        config=config,
        gbs=gbs,
        time_us=time_us,
        notify_us=notify_us,
    )


def _deepep_tuning(lines: list[str], notes: list[str]) -> tuple[list[EpRow], dict[str, int]]:
    rows: list[EpRow] = []
    pending: list[EpRow] = []
    problem: dict[str, int] = {}
    for line in lines:
        if m := _CONFIG.search(line):
            problem = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(1))}
        elif m := _TUNING.search(line):
            row = _tuning_row(m)
            if row.summary != "best":
                pending.append(row)
                continue
            update = {"phase": row.phase, "precision": row.precision}
            rows.extend(p.model_copy(update=update) for p in pending)
            rows.append(row)
            pending = []
    if pending:
        notes.append(
            f"{len(pending)} [tuning] lines after the last Best line left out: the benchmark "
            "names a sweep's phase only in the Best line that ends it"
        )
    return rows, problem


def _deepep_low_latency(lines: list[str]) -> list[EpRow]:
    rows: list[EpRow] = []
    for line in lines:
        if m := _LL_BOTH.search(line):
            rank, gbs, avg, lo, hi = m.groups()
            rows.append(
                EpRow(
                    phase="dispatch+combine",
                    rank=int(rank),
                    gbs={"total": float(gbs)},
                    time_us=float(avg),
                    min_us=float(lo),
                    max_us=float(hi),
                )
            )
        elif m := _LL_EACH.search(line):
            rank, d_gbs, d_t, c_gbs, c_t = m.groups()
            for phase, gbs, t in (("dispatch", d_gbs, d_t), ("combine", c_gbs, c_t)):
                rows.append(
                    EpRow(phase=phase, rank=int(rank), gbs={"total": float(gbs)}, time_us=float(t))
                )
        elif m := _LL_HOOK.search(line):
            rank, d_send, d_recv, c_send, c_recv = m.groups()
            for phase, send, recv in (("dispatch", d_send, d_recv), ("combine", c_send, c_recv)):
                rows.append(
                    EpRow(phase=phase, rank=int(rank), send_us=float(send), recv_us=float(recv))
                )
    return rows


def _mori_intranode(lines: list[str]) -> tuple[list[EpRow], int | None]:
    rows: list[EpRow] = []
    configs: dict[str, EpConfig] = {}
    section = None
    ranks = None
    phases = {"Dispatch": "dispatch", "Combine": "combine", "End-to-end": "dispatch+combine"}
    for line in lines:
        if m := _MORI_BANNER.search(line):
            d_blocks, d_warps, c_blocks, c_warps = (int(v) for v in m.groups())
            configs = {
                "dispatch": EpConfig(block_num=d_blocks, warp_per_block=d_warps),
                "combine": EpConfig(block_num=c_blocks, warp_per_block=c_warps),
            }
        elif m := _MORI_SECTION.match(line):
            section = phases[m.group(1)]
        elif section in ("dispatch", "combine") and (m := _MORI_ROUND.match(line)):
            round_, durations, _bandwidths, _mb, lat, bw, ll = m.groups()
            ranks = len(_floats(durations))
            rows.append(
                EpRow(
                    phase=section,
                    round=int(round_),
                    config=configs.get(section),
                    gbs={"xgmi": float(bw), "ll": float(ll)},
                    time_us=float(lat),
                )
            )
        elif section == "dispatch+combine" and (m := _MORI_E2E.match(line)):
            per_rank = _floats(m.group(2))
            rows.append(
                EpRow(
                    phase="dispatch+combine",
                    round=int(m.group(1)),
                    time_us=round(sum(per_rank) / len(per_rank), 2),
                )
            )
    return rows, ranks


def _mori_internode(lines: list[str]) -> list[EpRow]:
    rows: list[EpRow] = []
    phase = precision = None
    columns: list[str] = []
    for line in lines:
        if m := _MORI_TITLE.match(line.strip()):
            phase, precision = m.group(1).lower(), _precision(m.group(2))
        elif line.strip().startswith("| Metrics"):
            columns = [c.strip() for c in line.strip().strip("|").split("|")][1:]
        elif phase and (m := _MORI_ROW.match(line.strip())):
            values = [v.strip() for v in m.group(2).split("|")]
            if len(values) != len(columns) or not all(re.fullmatch(_F, v) for v in values):
                continue  # a row cut off or garbled in the capture
            cells = dict(zip(columns, map(float, values), strict=True))
            rows.append(
                EpRow(
                    phase=phase,
                    precision=precision,
                    summary=m.group(1).lower(),
                    gbs={link: cells[c] for c, link in _MORI_COLUMNS.items() if c in cells},
                    time_us=cells.get("Latency (us)"),
                )
            )
    return rows


def _benchmarks(lines: list[str]) -> set[str]:
    found = set()
    for line in lines:
        if m := _TUNING.search(line):
            found.add("deepep-internode" if m.group(5) else "deepep-intranode")
        elif _LL_BOTH.search(line) or _LL_EACH.search(line) or _LL_HOOK.search(line):
            found.add("deepep-low-latency")
        elif _MORI_ROUND.match(line):
            found.add("mori-intranode")
        elif _MORI_TITLE.match(line.strip()):
            found.add("mori-internode")
    return found


def parse_text(text: str, source: str | None = None) -> EpAllToAllResult:
    """One benchmark's output; raises :class:`ResultImportError` naming ``source``."""
    where = source or "input"
    lines = text.splitlines()
    found = _benchmarks(lines)
    if not found:
        raise ResultImportError(
            f"{where}: no DeepEP or MoRI dispatch/combine result lines found (expected "
            "'[tuning] ...', '[rank N] Dispatch ... bandwidth', MoRI 'Round N duration(us)' or "
            "its 'Dispatch Performance' table)"
        )
    if len(found) > 1:
        raise ResultImportError(
            f"{where}: holds output of {' and '.join(sorted(found))}; import each run's output "
            "as its own file"
        )
    benchmark = found.pop()
    notes: list[str] = []
    problem: dict[str, int] = {}
    ranks = None
    if benchmark.startswith("deepep-in"):
        rows, problem = _deepep_tuning(lines, notes)
    elif benchmark == "deepep-low-latency":
        rows = _deepep_low_latency(lines)
        ranks = len({row.rank for row in rows})
    elif benchmark == "mori-intranode":
        rows, ranks = _mori_intranode(lines)
    else:
        rows = _mori_internode(lines)
    if not rows:
        raise ResultImportError(f"{where}: {benchmark} output with no complete result line")
    return EpAllToAllResult(
        tool="mori" if benchmark.startswith("mori") else "deepep",
        benchmark=benchmark,
        source_file=source,
        ranks=ranks,
        problem=problem,
        rows=rows,
        definitions=DEFINITIONS[benchmark],
        notes=notes,
    )


def parse(paths: list[Path], workload: str = "", gpus: int | None = None) -> Imported:
    results = []
    for path in paths:
        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise ResultImportError(f"{path}: cannot read: {exc.strerror or exc}") from None
        results.append(parse_text(text, Path(path).name))
    # import_files writes each as collectives/<result.collective>.json (ep_alltoall-<benchmark>)
    return Imported(tool=results[0].tool if results else "deepep", collectives=results)
