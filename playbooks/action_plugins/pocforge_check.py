"""Record one acceptance check as data: ``check``, ``status``, ``measured``, ``threshold``.

Runs on the controller (no module is sent to the host). The check itself never fails the
task: it appends its record to the host fact ``pocforge_checks`` so that every check of a
host runs, and one verdict task at the end of the play fails the host naming each failed
check. The driver reads the records from the task results (``pocforge_check``).

Operators (``op``):

- ``eq`` / ``ge`` / ``le``: compare ``measured`` with ``threshold`` (numbers or strings).
- ``in``: ``measured`` is one of the values in ``threshold``.
- ``all_in``: every value in the list ``measured`` is in ``threshold``.
- ``majority``: ``threshold`` is the list of every host's value; pass when ``measured``
  equals the most common one (identical versions across nodes).
- ``contains``: ``measured`` (a string or a non-empty list) contains ``threshold`` in every
  item, ignoring case (``AMD Instinct MI300X`` contains ``MI300X``).
- ``true``: ``measured`` is truthy; ``threshold`` only describes what was expected.

``skip`` (a reason) records a first-class ``skip`` outcome instead of comparing: the check
could not run or does not apply here, and the record says why (``reason``; the message is
``<check>: skipped: <reason>``); ``measured`` keeps whatever was measured (a busbw without a
reference to judge it by is still a measurement). A condition a check cannot judge is a skip
with its reason, never a silent pass.

``detail`` is appended to the message of a failed check (which device, which file); ``note``
to every message (how a passing value was judged, e.g. links downtrained at idle).
"""

from __future__ import annotations

from collections import Counter

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

_OPS = ("eq", "ge", "le", "in", "all_in", "contains", "majority", "true")


def _show(value):
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    return str(value)


def _number(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    try:
        return float(str(value).strip())
    except (TypeError, ValueError):
        return None


def evaluate(op, measured, threshold):
    """Return ``(passed, expected_text)`` for one comparison."""
    if op in ("eq", "ge", "le"):
        m, t = _number(measured), _number(threshold)
        if m is None or t is None:
            if op != "eq":
                return False, f"{'>=' if op == 'ge' else '<='} {_show(threshold)}"
            return str(measured) == str(threshold), _show(threshold)
        if op == "eq":
            return m == t, _show(threshold)
        if op == "ge":
            return m >= t, f">= {_show(threshold)}"
        return m <= t, f"<= {_show(threshold)}"
    if op == "in":
        allowed = list(threshold or [])
        return measured in allowed, f"one of {_show(allowed)}"
    if op == "all_in":
        allowed = list(threshold or [])
        values = list(measured or [])
        bad = [v for v in values if v not in allowed]
        return bool(values) and not bad, f"all in {_show(allowed)}"
    if op == "contains":
        items = [measured] if isinstance(measured, str) else list(measured or [])
        needle = str(threshold).lower()
        return bool(items) and all(needle in str(v).lower() for v in items), f"'{threshold}'"
    if op == "majority":
        values = [v for v in (threshold or []) if v not in (None, "")]
        if not values:
            return False, "a value reported by the other hosts"
        common, count = Counter(map(str, values)).most_common(1)[0]
        return str(measured) == common, f"{common} (as on {count} of {len(values)} hosts)"
    if op == "true":
        return bool(measured), _show(threshold) if threshold not in (None, "") else "true"
    raise AnsibleActionFail(f"pocforge_check: unknown op {op!r} (one of {', '.join(_OPS)})")


def record(spec):
    """Evaluate one check spec (a dict of the task arguments) into its record."""
    check = spec.get("check")
    if not check:
        raise AnsibleActionFail("pocforge_check: 'check' is required")
    op = spec.get("op") or "eq"
    measured, threshold = spec.get("measured"), spec.get("threshold")
    unit = spec.get("unit") or ""
    skip = spec.get("skip") or ""
    suffix = f" {unit}" if unit else ""
    reason = ""
    if skip and not (isinstance(skip, str) and skip.lower() in ("false", "no", "0")):
        status, expected = "skip", _show(threshold) if threshold is not None else ""
        reason = str(skip).strip()
        message = f"{check}: skipped: {reason}"
    else:
        passed, expected = evaluate(op, measured, threshold)
        status = "pass" if passed else "fail"
        if passed:
            message = f"{check}: {_show(measured)}{suffix} (expected {expected}{suffix})"
        else:
            message = f"{check}: expected {expected}{suffix}, found {_show(measured)}{suffix}"
            if spec.get("detail"):
                message += f" ({spec['detail']})"
    if spec.get("note") and status != "skip":
        message += f"; {spec['note']}"
    return {
        "check": check,
        "status": status,
        "measured": measured,
        "threshold": threshold,
        "expected": expected,
        "unit": unit,
        "reason": reason,
        "message": message,
    }


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(
        ("check", "measured", "threshold", "op", "skip", "unit", "detail", "note", "checks")
    )
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._task.args
        if "checks" in args:
            specs = args["checks"]
            if not isinstance(specs, list):
                raise AnsibleActionFail("pocforge_check: 'checks' must be a list of checks")
            records = [record(dict(spec)) for spec in specs]
        else:
            records = [record(dict(args))]
        names = {r["check"] for r in records}
        previous = list((task_vars or {}).get("ansible_facts", {}).get("pocforge_checks") or [])
        previous = [r for r in previous if r.get("check") not in names]
        result.update(
            changed=False,
            msg="; ".join(r["message"] for r in records),
            pocforge_checks=records,
            ansible_facts={"pocforge_checks": previous + records},
        )
        if "checks" not in args:
            result["pocforge_check"] = records[0]
        return result


__all__ = ["ActionModule", "evaluate", "record"]
