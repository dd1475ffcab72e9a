"""``pocforge cluster <verb> POC --dry-run``: what a stage would run where, before any SSH."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.process  # ansible-playbook is a process of its own


def test_dry_run_lists_the_hosts_and_tasks_without_connecting():
    """The example POC's nodes are documentation addresses (198.51.100.0/24) no SSH reaches:
    the dry run lists both hosts and preflight's tasks in order, and exits 0."""
    from click.testing import CliRunner

    from pocforge.cli import main

    result = CliRunner().invoke(
        main, ["cluster", "check", "llama-3.1-70b-fp8-mi355x-megatron", "--dry-run"]
    )
    assert result.exit_code == 0, result.output
    assert "hosts (2):" in result.output
    assert "mi355x-train-01" in result.output and "mi355x-train-02" in result.output
    tasks = [line.strip() for line in result.output.splitlines() if " : " in line]
    assert tasks and all("TAGS" in t for t in tasks)
    limited = CliRunner().invoke(
        main,
        [
            "cluster",
            "up",
            "llama-3.1-70b-fp8-mi355x-megatron",
            "--dry-run",
            "--limit",
            "mi355x-train-02",
        ],
    )
    assert "hosts (1):" in limited.output and "mi355x-train-01" not in limited.output
    assert "poc_folder : Copy the POC's folder" in limited.output
