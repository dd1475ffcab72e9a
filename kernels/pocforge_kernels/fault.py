"""A deliberately wrong kernel, on request: ``POCFORGE_KERNELS_FAULT="rms_norm=1.05"``
scales every output of the named op(s) by the factor (comma-separated ``op=factor``).

It exists so the correctness gates prove they catch a wrong kernel — the parity gate's
tests serve a model whose RMSNorm is 5% off and expect the gate to fail naming it. The
framework plugins take their ops through :func:`pocforge_kernels.load`, which applies it;
unset (always, outside those tests), ops are returned unwrapped.
"""

from __future__ import annotations

import functools
import os

FAULT_ENV = "POCFORGE_KERNELS_FAULT"


def faults(value: str | None = None) -> dict[str, float]:
    raw = os.environ.get(FAULT_ENV, "") if value is None else value
    out = {}
    for part in filter(None, (p.strip() for p in raw.split(","))):
        op, _, factor = part.partition("=")
        try:
            out[op.strip()] = float(factor)
        except ValueError:
            raise ValueError(f"{FAULT_ENV}={raw!r}: write op=factor, e.g. rms_norm=1.05") from None
    return out


def _scaled(value, factor: float):
    if isinstance(value, tuple):
        return tuple(_scaled(v, factor) for v in value)
    return value * factor if hasattr(value, "dtype") else value


def wrap(name: str, function):
    """``function`` with its outputs scaled when ``POCFORGE_KERNELS_FAULT`` names ``name``."""
    factor = faults().get(name)
    if factor is None:
        return function

    @functools.wraps(function)
    def faulty(*args, **kwargs):
        return _scaled(function(*args, **kwargs), factor)

    return faulty
