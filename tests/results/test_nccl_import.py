"""``pocforge import --format nccl-tests|rccl-tests`` on real outputs of several versions,
machines and launchers (``tests/data/collectives/``, sources in ``tests/data/README.md``):
each run of a file is a result of its own, with the numbers the file prints."""

from __future__ import annotations

import pytest

from pocforge.results.importers import import_files, parse
from pocforge.results.store import RunStore

from ..conftest import REPO

DATA = REPO / "tests" / "data" / "collectives"

# file -> per run: (tool, version, collective, ranks, nodes, rows, peak out-of-place busbw,
# the file's own "Avg bus bandwidth"), each read off the file by hand
RUNS = {
    "nccl_all_gather_gb10_2node_2gpu.txt": [
        ("nccl-tests", "2.18.5", "all_gather", 2, 2, 1, 22.94, 22.9611)
    ],
    "nccl_all_reduce_a100_2node_16gpu_tagged_pre210.txt": [
        ("nccl-tests", None, "all_reduce", 16, 2, 30, 43.81, 11.2432)
    ],
    "nccl_all_reduce_h100_2node_16gpu.txt": [
        ("nccl-tests", None, "all_reduce", 16, 2, 31, 338.82, 70.742)
    ],
    "nccl_all_reduce_h100_2node_16gpu_srun_label.txt": [
        ("nccl-tests", None, "all_reduce", 16, 2, 11, 166.22, 142.735)
    ],
    "nccl_all_reduce_mpi_rtx5090_3runs_tagged.txt": [
        ("nccl-tests", "2.18.0", "all_reduce", 2, 1, 8, 2.30, 1.57614),
        ("nccl-tests", "2.18.0", "all_reduce", 2, 1, 8, 2.31, 1.58183),
        ("nccl-tests", "2.18.0", "all_reduce", 2, 1, 8, 2.30, 1.58058),
    ],
    "nccl_alltoall_gb300_1node_4gpu.txt": [
        ("nccl-tests", None, "alltoall", 4, 1, 2, 627.69, 381.478)
    ],
    "rccl_all_reduce_mi300x_1node_8gpu.txt": [
        ("rccl-tests", "develop:a7809b3", "all_reduce", 8, 1, 31, 315.69, 110.464)
    ],
    "rccl_all_reduce_mi300x_2node_16gpu.txt": [
        ("rccl-tests", "develop:448c4c7", "all_reduce", 16, 2, 32, 357.46, 92.3318)
    ],
    "rccl_all_reduce_mi300x_vf_1node_8gpu.txt": [
        ("rccl-tests", ":+", "all_reduce", 8, 1, 25, 293.07, 54.8575)
    ],
    "rccl_alltoall_mi355x_1node_8gpu.txt": [
        ("rccl-tests", "HEAD:e1b8a3a", "alltoall", 8, 1, 2, 361.41, 236.187)
    ],
}


def test_every_real_output_is_under_test():
    assert sorted(RUNS) == sorted(path.name for path in DATA.glob("*.txt"))


@pytest.mark.parametrize("name", sorted(RUNS))
def test_each_run_of_a_real_output_reads_as_printed(name):
    fmt = "rccl-tests" if name.startswith("rccl") else "nccl-tests"
    found = parse([DATA / name], fmt).collectives
    assert [
        (c.tool, c.tool_version, c.collective, c.ranks, c.nodes, len(c.rows),
         max(row.busbw_gbs for row in c.rows), c.avg_busbw_gbs)
        for c in found
    ] == RUNS[name]  # fmt: skip
    for result in found:
        sizes = [row.bytes for row in result.rows]
        assert sizes == sorted(set(sizes)), "a run's sizes are its own, once each"


def test_launcher_prefixes_are_stripped():
    """mpirun --tag-output (Kubeflow's MPIJob) and srun --label: the table under them."""
    tagged = parse([DATA / "nccl_all_reduce_a100_2node_16gpu_tagged_pre210.txt"], "nccl-tests")
    (result,) = tagged.collectives
    assert result.rows[0].bytes == 8 and result.rows[-1].bytes == 4294967296
    assert result.devices == ["A100-SXM4-40GB"]
    (labelled,) = parse(
        [DATA / "nccl_all_reduce_h100_2node_16gpu_srun_label.txt"], "nccl-tests"
    ).collectives
    assert labelled.rows[0].inplace_busbw_gbs == 87.38 and labelled.rows[0].wrong is None


# kubectl's own prefixes, as real kubectl output shows them: ``--prefix`` in
# kubernetes/kubernetes pull request #123874 ("[pod/y-844fbc9777-vhl79/nginx] …") and
# ``--timestamps`` in MTDL9/vim-log-highlighting pull request #17
# ("2023-08-17T07:52:26.131134150Z …"); kubectl writes the pod prefix first
KUBECTL = {
    "--prefix": "[pod/y-844fbc9777-vhl79/nginx] ",
    "--timestamps": "2023-08-17T07:52:26.131134150Z ",
    "--prefix --timestamps": "[pod/y-844fbc9777-vhl79/nginx] 2023-08-17T07:52:26.131134150Z ",
}


@pytest.mark.parametrize("flags", sorted(KUBECTL))
def test_kubectl_log_prefixes_are_stripped(flags, tmp_path):
    """The MI300X 2-node output as ``kubectl logs`` of its launcher pod prints it with
    ``flags`` (the prefix on every line, as kubectl puts it): the same run."""
    plain = DATA / "rccl_all_reduce_mi300x_2node_16gpu.txt"
    path = tmp_path / plain.name  # the collective is named by the file here, as there
    path.write_text(
        "".join(KUBECTL[flags] + line + "\n" for line in plain.read_text().splitlines())
    )
    (found,) = parse([path], "rccl-tests").collectives
    (expected,) = parse([plain], "rccl-tests").collectives
    assert found.model_dump(exclude={"source_file"}) == expected.model_dump(exclude={"source_file"})


def test_a_table_before_2_10_is_read_by_its_header_with_a_caveat():
    """No root column and an 'error' column (the largest error, starred above tolerance):
    read by the table's own header, wrong 0 where nothing is starred, and said."""
    (result,) = parse(
        [DATA / "nccl_all_reduce_a100_2node_16gpu_tagged_pre210.txt"], "nccl-tests"
    ).collectives
    assert (result.rows[-1].time_us, result.rows[-1].inplace_busbw_gbs) == (183834, 43.72)
    assert {row.wrong for row in result.rows} == {0} and result.rows[0].redop == "sum"
    assert result.notes == [
        "a table of nccl-tests before 2.10: its 'error' column is the largest numerical "
        "error, not a count of wrong values; wrong is 1 where it was starred (above "
        "tolerance), else 0"
    ]


def test_runs_grepped_into_one_file_are_written_apart(tmp_path):
    """Three runs of all_reduce_perf_mpi in one file: three results, never one with three
    of every size; the MPI binary's name is its collective."""
    run = import_files(
        [DATA / "nccl_all_reduce_mpi_rtx5090_3runs_tagged.txt"],
        "nccl-tests",
        store=RunStore(tmp_path),
    )
    written = sorted(path.name for path in (run.path / "collectives").glob("*.json"))
    assert written == ["all_reduce-2.json", "all_reduce-3.json", "all_reduce.json"]


def test_a_table_cut_before_its_trailer_says_so(tmp_path):
    lines = (DATA / "nccl_all_reduce_h100_2node_16gpu_srun_label.txt").read_text().splitlines()
    cut = tmp_path / "cut.txt"
    cut.write_text("\n".join(lines[:30]) + "\n")  # its ranks, header and first 7 rows
    (result,) = parse([cut], "nccl-tests").collectives
    assert len(result.rows) == 7 and result.avg_busbw_gbs is None
    assert result.notes == [
        "the table ends before its trailer (no '# Avg bus bandwidth' line): the run may have "
        "been cut short, its largest sizes missing"
    ]


def test_the_format_named_labels_an_output_that_names_no_tool():
    """An output without a version line is what the user says it is (not a guess from the
    file's name); one that names itself keeps its name, and the mismatch is said."""
    (named,) = parse(
        [DATA / "nccl_all_reduce_h100_2node_16gpu_srun_label.txt"], "rccl-tests"
    ).collectives
    assert named.tool == "rccl-tests" and named.notes == []
    (own,) = parse([DATA / "rccl_all_reduce_mi300x_1node_8gpu.txt"], "nccl-tests").collectives
    assert own.tool == "rccl-tests"
    assert own.notes[0] == (
        "imported as nccl-tests, but the output names itself rccl-tests develop:a7809b3"
    )


def test_the_roles_checks_read_the_same_runs(nccl_tests_filter):
    """The collectives role's filter reads through the same reader: of several runs, the
    last, with its own average."""
    text = (DATA / "nccl_all_reduce_mpi_rtx5090_3runs_tagged.txt").read_text()
    parsed = nccl_tests_filter.parse_nccl_tests(text)
    assert (parsed["op"], parsed["avg_busbw"], len(parsed["rows"])) == ("all_reduce", 1.58058, 8)


@pytest.fixture(scope="module")
def nccl_tests_filter():
    from ..cluster.conftest import _load

    return _load("roles/collectives/filter_plugins/nccl_tests.py", "pocforge_nccl_tests_import")
