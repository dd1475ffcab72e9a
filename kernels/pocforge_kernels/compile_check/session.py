"""One compile check's state: the records, and the configs every launch looked up.

A case runs once at the configs its shape selects, then once per other bucket of
each config file it consulted, so every shipped bucket is compiled
(:meth:`Session.compile_case`).  Launches reach :meth:`Session.compile` and
:meth:`Session.launch_config` through :func:`.intercept.stopped_launches`.
"""

from __future__ import annotations

import time

from .. import config
from .inspect import inspect
from .intercept import REAL_COMPILE, NotLaunched
from .records import Compiled, error_text
from .targets import Target


class Session:
    """Collects :class:`Compiled` records while the cases run with launches stopped."""

    def __init__(self):
        self.records: list[Compiled] = []
        self.target: Target | None = None  # set by stopped_launches
        self.case = ""
        self.consulted: list[str] = []  # config files and buckets this call has looked up
        # Every (arch, config file[bucket]) some launch ran under.  Two buckets with the same
        # parameters compile to one variant (Triton caches it), so records alone undercount.
        self.configs_checked: set[str] = set()
        self.forced: tuple[str, str] | None = None  # (config op, bucket) every lookup returns
        self.natural: dict[str, str] = {}  # config op -> the bucket the case's shape selected

    def compile(self, src, target=None, options=None, **kwargs):
        """``triton.compiler.compile`` for the session's target: record, never launch."""
        options = options or {}
        record = Compiled(
            arch=self.target.arch,
            kernel=getattr(src, "name", None) or src.fn.__name__,
            case=self.case,
            config=", ".join(self.consulted) or "-",
            num_warps=options.get("num_warps", 4),
            num_stages=options.get("num_stages", 3),
            seconds=0.0,
        )
        start = time.perf_counter()
        try:
            compiled = REAL_COMPILE(src, target=target, options=options, **kwargs)
            inspect(compiled, self.target, record)
        except Exception as exc:  # reported in the table, never raised
            record.error = error_text(exc)
        record.seconds = round(time.perf_counter() - start, 3)
        self.records.append(record)
        return NotLaunched()

    def launch_config(self, op, size, device=None, arch=None):
        """``config.launch_config`` for the session's arch, or the bucket being forced."""
        table = config.load_table(op, self.target.arch)
        forced = self.forced and self.forced[0] == op
        bucket = self.forced[1] if forced else config.choose_bucket(table, size)
        self.natural.setdefault(op, bucket)
        path = config.config_path(op, self.target.arch)
        shipped = path.is_relative_to(config.KERNELS_ROOT)
        used = f"{path.relative_to(config.KERNELS_ROOT) if shipped else path}[{bucket}]"
        if used not in self.consulted:
            self.consulted.append(used)
        self.configs_checked.add(f"{self.target.arch} {used}")
        return dict(table["configs"][bucket])

    def compile_case(self, name: str, call) -> list[str]:
        """Run ``call`` at the configs its shape selects, then once per other bucket of each
        config file it consulted; returns what failed outside the compiler."""
        self.case, self.natural = name, {}
        error = self._run(call, None)
        if error:  # the shape itself fails: forcing buckets would repeat it
            return [error]
        errors = []
        for op, natural in list(self.natural.items()):  # a forced run may consult more
            for bucket in config.load_table(op, self.target.arch)["configs"]:
                if bucket != natural and (error := self._run(call, (op, bucket))):
                    errors.append(error)
        self.forced = None
        return errors

    def _run(self, call, forced: tuple[str, str] | None) -> str | None:
        self.forced, self.consulted = forced, []
        try:
            call()
        except Exception as exc:
            where = f" {forced[0]}/{forced[1]}" if forced else ""
            return f"{self.target.arch} {self.case}{where}: {type(exc).__name__}: {exc}"[:400]
        return None
