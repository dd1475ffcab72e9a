"""Read torch.distributed.run's failure report (``ChildFailedError``) from a training log:
which rank died first, on which host, how (an exit code, or the signal that ended it).

torchrun prints, when a rank fails, a block of ``[n]:`` entries under ``Failures:`` and
``Root Cause (first observed failure):``, each with ``time``, ``host``, ``rank : R
(local_rank: L)``, ``exitcode : C (pid: P)`` (torch >= 2.11 adds the signal's name) and
``traceback``. A regular expression over those fixed lines, not a library: torch has no
reader for its own text, and the log is all a node hands back.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass
from datetime import datetime

_ENTRY = re.compile(
    r"^\[\d+\]:\s*\n"
    r"\s*time\s*:\s*(?P<time>\d{4}-\d{2}-\d{2}_\d{2}:\d{2}:\d{2})\s*\n"
    r"\s*host\s*:\s*(?P<host>\S+)\s*\n"
    r"\s*rank\s*:\s*(?P<rank>\d+) \(local_rank: (?P<local>\d+)\)\s*\n"
    r"\s*exitcode\s*:\s*(?P<code>-?\d+) \(pid: (?P<pid>\d+)\)",
    re.MULTILINE,
)
_ROOT = "Root Cause (first observed failure):"
# torchrun stamps a failure without an error file in whole seconds when it notices it; two
# ranks noticed in one poll can be a second apart
_SAME_MOMENT_S = 2


@dataclass(frozen=True)
class RankFailure:
    rank: int
    local_rank: int
    host: str
    exit_code: int
    pid: int
    time: str

    @property
    def signal_name(self) -> str | None:
        if self.exit_code >= 0:
            return None
        try:
            return signal.Signals(-self.exit_code).name
        except ValueError:
            return f"signal {-self.exit_code}"

    def how(self) -> str:
        return (
            f"was killed by {self.signal_name}"
            if self.signal_name
            else f"exited with code {self.exit_code}"
        )

    @property
    def stamp(self) -> datetime:
        return datetime.strptime(self.time, "%Y-%m-%d_%H:%M:%S")

    def line(self) -> str:
        return f"rank {self.rank} (local rank {self.local_rank} on {self.host}) {self.how()} at {self.time}"


@dataclass(frozen=True)
class LauncherReport:
    root_cause: RankFailure | None
    others: list[RankFailure]

    @property
    def first(self) -> RankFailure | None:
        """The failure that caused the rest. torchrun's root cause is the failure with the
        smallest timestamp, but a rank without an error file is stamped in whole seconds
        when the launcher notices it, so a rank SIGKILLed and its peer that then lost the
        connection (exit 1) tie, and torchrun names the lower rank. Among the failures
        stamped within a poll of the earliest (``_SAME_MOMENT_S``), a rank ended by a signal
        the launcher did not send comes first, then one that exited with an error, then one
        the launcher stopped (SIGTERM)."""
        failures = ([self.root_cause] if self.root_cause else []) + self.others
        if not failures:
            return None
        earliest = min(f.stamp for f in failures)
        together = [f for f in failures if (f.stamp - earliest).total_seconds() <= _SAME_MOMENT_S]
        return min(together, key=_blame_order)

    def line(self) -> str:
        """One line: the first failure, then how many other ranks the launcher lost."""
        first = self.first
        if first is None:
            return "the launcher reported a failure it did not describe"
        rest = [f for f in [self.root_cause, *self.others] if f is not None and f != first]
        stopped = sum(o.exit_code == -signal.SIGTERM for o in rest)
        tail = ""
        if rest:
            tail = f"; {len(rest)} other rank(s) ended too"
            if stopped == len(rest):
                tail = f"; the launcher stopped the other {len(rest)} rank(s) (SIGTERM)"
        return first.line() + tail


def _blame_order(failure: RankFailure) -> int:
    if failure.exit_code < 0 and failure.exit_code != -signal.SIGTERM:
        return 0
    return 1 if failure.exit_code > 0 else 2


def parse_launcher_report(log: str) -> LauncherReport | None:
    """The last failure report in ``log``, or None when there is none."""
    start = log.rfind("ChildFailedError")
    if start < 0:
        return None
    text = log[start:]
    root_at = text.find(_ROOT)
    failures = text if root_at < 0 else text[:root_at]
    others = [_failure(m) for m in _ENTRY.finditer(failures)]
    root = None
    if root_at >= 0:
        found = _ENTRY.search(text, root_at)
        root = _failure(found) if found else None
    if root is None and not others:
        return None
    return LauncherReport(root_cause=root, others=others)


def _failure(m: re.Match) -> RankFailure:
    return RankFailure(
        rank=int(m["rank"]),
        local_rank=int(m["local"]),
        host=m["host"],
        exit_code=int(m["code"]),
        pid=int(m["pid"]),
        time=m["time"],
    )
