"""What ``pocforge run`` says while it runs is printed as it is: a line that quotes a
server's log (vLLM's ``[wrapper.py:100]``) keeps its brackets, a ``[/...]`` in it does not
raise, and a long line is not broken at the terminal's width."""

from __future__ import annotations

import io

from rich.console import Console

from pocforge.cli.run import literal

LINE = (
    "profile: c2: no table from ['rank0']: (Worker pid=22842) WARNING 12-02 18:04:20 "
    "[wrapper.py:100] Failed to stop profiler: 'utf-8' codec can't decode byte 0x90 [/bold]"
)


def test_a_line_is_printed_literally_and_whole():
    out = io.StringIO()
    say = literal(Console(file=out, width=40, force_terminal=False))
    say(LINE)
    say("serving: done")
    assert out.getvalue() == LINE + "\nserving: done\n"
