"""The results disk fills up mid-sweep (a 64 KiB tmpfs): the client stops with one line
naming the file and the fix, exit 1, no traceback, and what it wrote before stays whole:
every record line parses, the summary is the last one written in full."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess

import pytest

from benchmarks.scripted_server import running_instrument

from ._bench import bench_cmd, records_in
from .conftest import FaultRow

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root"),
]


@contextlib.contextmanager
def small_disk(folder, size: str = "64k"):
    folder.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], check=True)
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def test_a_full_results_disk_is_one_clear_line_and_nothing_half_written(
    tmp_path, tiny_llama, fault_table
):
    with small_disk(tmp_path / "disk") as disk, running_instrument(2.0, 1.0) as url:
        out = disk / "sweep"
        cmd = bench_cmd(url, tiny_llama, out, prompts=400, concurrency="4,8", osl=4)
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        records, torn = records_in(out)
        summary_text = (
            (out / "summary.json").read_text() if (out / "summary.json").exists() else None
        )
        leftovers = [p.name for p in out.iterdir() if p.name.startswith(".")]
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert (
        last.startswith("error: no space left on the device writing ")
        and "POCFORGE_RESULTS" in last
    )
    assert records and torn == 0  # whole lines only: the one that did not fit was taken back
    if summary_text is not None:
        json.loads(summary_text)  # the last summary written in full (atomic rename)
    assert not leftovers, leftovers  # no temporary file of a write that failed
    fault_table.add(
        FaultRow(
            "results disk full (64 KiB tmpfs) mid-sweep",
            tried=1,
            readable=1,
            lost=0,
            resumed=None,
            note=f"one line, exit 1; {len(records)} whole records kept, 0 torn",
        )
    )
