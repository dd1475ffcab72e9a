"""The fault suite: each test inflicts one kind of fault on a real run and adds a row to
the table ``make faults`` prints (fault, instants tried, runs readable afterwards, requests
lost, resumes completed).

``POCFORGE_FAULT_INSTANTS`` sets how many seeded instants the kill tests try (default 1
in ``make test``; ``make faults`` tries 20), ``POCFORGE_FAULT_SEED`` the seed.
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import asdict, dataclass

import pytest

_BAD: list[str] = []


def _whole(name: str, default: int) -> int:
    value = os.environ.get(name, str(default))
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number < 1 and name.endswith("INSTANTS") or number < 0:
        _BAD.append(f"{name}={value!r}: give a whole number (make faults INSTANTS=20)")
        return default
    return number


INSTANTS = _whole("POCFORGE_FAULT_INSTANTS", 1)  # make test: one; make faults: 20
SEED = _whole("POCFORGE_FAULT_SEED", 20261202)


def pytest_configure(config) -> None:
    if _BAD:
        raise pytest.UsageError("; ".join(_BAD))


# Where `make faults` asks for the table as JSON as well (the issue note quotes it).
TABLE_ENV = "POCFORGE_FAULT_TABLE"


@dataclass
class FaultRow:
    fault: str
    tried: int
    readable: int
    lost: int
    resumed: int | None  # None: the fault leaves nothing to resume (the run goes on)
    note: str = ""


class FaultTable:
    def __init__(self) -> None:
        self.rows: list[FaultRow] = []

    def add(self, row: FaultRow) -> FaultRow:
        self.rows.append(row)
        return row


_TABLE = FaultTable()


@pytest.fixture(scope="session")
def fault_table() -> FaultTable:
    return _TABLE


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if not _TABLE.rows:
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"fault suite (seed {SEED}, {INSTANTS} kill instants per test)")
    for column in (
        "fault",
        "instants tried",
        "runs readable",
        "requests lost",
        "resumes completed",
        "note",
    ):
        table.add_column(column, justify="left" if column in ("fault", "note") else "right")
    for row in _TABLE.rows:
        resumed = "-" if row.resumed is None else f"{row.resumed}/{row.tried}"
        table.add_row(
            row.fault,
            str(row.tried),
            f"{row.readable}/{row.tried}",
            str(row.lost),
            resumed,
            row.note,
        )
    console = Console(file=io.StringIO(), width=160)
    console.print(table)
    terminalreporter.write(console.file.getvalue())
    if out := os.environ.get(TABLE_ENV):
        with open(out, "w", encoding="utf-8") as fh:
            json.dump([asdict(r) for r in _TABLE.rows], fh, indent=1)
