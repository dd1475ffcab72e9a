"""Judge the PCIe links of a host's GPUs or NICs: one speed and one width check for the host.

Input: the devices ``probe_pcie.py`` read (each device's own link and the bridges above it,
up to the root port). The rule, per device, over its whole path:

- **Width (strict).** The narrowest trained width along the path must reach the device's own
  maximum width (``max_link_width``, LnkCap) - or the pinned minimum, when one is set. A
  x16 GPU in a x8 slot, behind a x8 switch uplink, or trained x8 on a bad riser fails.
- **Speed capability.** The slowest *maximum* speed along the path (LnkCap of every hop)
  must reach the device's own maximum speed - or the pinned minimum. A Gen5 GPU under a
  Gen4 root port or switch fails, whatever the link does right now.
- **Current speed.** A link running below that capability is *downtrained*. GPUs and NICs
  lower their link speed when idle to save power (``nvidia-smi --help-query-gpu``: "The
  current PCI-E link generation. These may be reduced when the GPU is not in use."; an idle
  GPU shows ``LnkSta: Speed 2.5GT/s (downgraded)`` in lspci). So a downtrained link passes
  when its device is idle (busy 0 %), and the message says so; it fails when the device is
  busy (the link should have trained up under load). Where the busy state is not readable
  (NICs, GPUs without ``gpu_busy_percent``) it passes on capability alone, and says that.

The measured value of the speed check is the speed the link is judged at: its capability
when idle-downtrained (or at full speed), its current speed when busy and downtrained.
Standard library only, so that the kit's tests import it directly.
"""

from __future__ import annotations

_KEYS = ("speed_gts", "max_speed_gts", "width", "max_width")


def _num(value):
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


def _show(value):
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _lowest(hops, key):
    """(value, bdf) of the smallest known ``key`` along the path; (None, None) if none."""
    best = (None, None)
    for hop in hops:
        value = _num(hop.get(key))
        if value is not None and (best[0] is None or value < best[0]):
            best = (value, hop.get("bdf"))
    return best


def judge(device, min_speed_gts=0, min_width=0, busy_percent=None):
    """One device's path -> its verdicts, the values judged and the reasons, as a dict."""
    hops = [device] + list(device.get("path") or [])
    need_speed = _num(min_speed_gts) or _num(device.get("max_speed_gts"))
    need_width = _num(min_width) or _num(device.get("max_width"))
    cap_speed, speed_limiter = _lowest(hops, "max_speed_gts")
    cur_speed, _ = _lowest(hops, "speed_gts")
    cur_width, width_limiter = _lowest(hops, "width")
    busy = device.get("busy_percent")
    busy = busy_percent if busy is None else busy
    busy = None if busy is None else _num(busy) or 0.0
    bdf = device.get("bdf")
    out = {
        "bdf": bdf,
        "need_speed": need_speed,
        "need_width": need_width,
        "cap_speed": cap_speed,
        "cur_speed": cur_speed,
        "cur_width": cur_width,
        "busy_percent": busy,
        "downtrained": False,
        "idle": None if busy is None else busy == 0,
        "speed": cap_speed,
        "speed_ok": None,
        "width_ok": None,
        "speed_why": "",
        "width_why": "",
    }
    if cur_width is not None and need_width is not None:
        out["width_ok"] = cur_width >= need_width
        if not out["width_ok"]:
            at = "" if width_limiter == bdf else f" (the link at {width_limiter})"
            out["width_why"] = (
                f"{bdf} trained x{_show(cur_width)}{at}, the device is x{_show(need_width)}"
            )
    if cap_speed is None or need_speed is None:
        return out
    out["downtrained"] = cur_speed is not None and cur_speed < cap_speed
    if out["downtrained"] and busy:
        out["speed"] = cur_speed
    out["speed_ok"] = out["speed"] >= need_speed
    if cap_speed < need_speed:
        at = "" if speed_limiter == bdf else f", limited by {speed_limiter}"
        out["speed_why"] = (
            f"{bdf} path capable of {_show(cap_speed)} GT/s{at}, "
            f"the device needs {_show(need_speed)} GT/s"
        )
    elif not out["speed_ok"]:
        out["speed_why"] = (
            f"{bdf} at {_show(cur_speed)} GT/s while {_show(busy)}% busy "
            f"(capable of {_show(cap_speed)} GT/s)"
        )
    return out


def _fallback(device, records):
    """A device sysfs could not describe takes the values its tool reported (nvidia-smi)."""
    if not device.get("error"):
        return device
    for rec in records or []:
        if rec.get("bdf") == device.get("bdf") and any(_num(rec.get(k)) for k in _KEYS):
            return {**rec, "path": [], "busy_percent": device.get("busy_percent")}
    return device


def pcie_checks(devices, kind, min_speed_gts=0, min_width=0, skip="", fallback=None, busy=None):
    """The ``<kind>_pcie_speed`` and ``<kind>_pcie_width`` checks (pocforge_check specs).

    ``devices``: probe_pcie's records of this kind; ``fallback``: the tool's own link records
    (gpu_stack_data.pcie, rdma pcie) for devices sysfs does not show; ``busy``: bdf -> busy %
    from the GPU tool (nvidia-smi utilization.gpu). ``skip``: a reason that applies to both.
    """
    busy = busy or {}
    names = (f"{kind}_pcie_speed", f"{kind}_pcie_width")
    base = [
        {"check": names[0], "op": "ge", "unit": "GT/s"},
        {"check": names[1], "op": "ge", "unit": "lanes"},
    ]
    if skip:
        return [{**spec, "measured": None, "threshold": None, "skip": skip} for spec in base]
    devices = [_fallback(d, fallback) for d in devices or []]
    judged = [
        judge(d, min_speed_gts, min_width, busy.get(d.get("bdf")))
        for d in devices
        if not d.get("error")
    ]
    unreadable = [d.get("error") for d in devices if d.get("error")]
    if not judged:
        why = unreadable[0] if unreadable else f"no {kind} device reported"
        reason = f"PCIe link state not readable: {why}"
        return [{**spec, "measured": None, "threshold": None, "skip": reason} for spec in base]
    extra = f"; {len(unreadable)} not readable ({unreadable[0]})" if unreadable else ""
    return [_speed(base[0], judged, extra), _width(base[1], judged, extra)]


def _worst(judged, ok_key, value_key, need_key):
    rated = [j for j in judged if j[ok_key] is not None]
    if not rated:
        return None
    return min(rated, key=lambda j: (j[ok_key], j[value_key] / j[need_key]))


def _speed(spec, judged, extra):
    worst = _worst(judged, "speed_ok", "speed", "need_speed")
    if worst is None:
        return {**spec, "measured": None, "threshold": None, "skip": "max_link_speed unknown"}
    down = [j for j in judged if j["downtrained"]]
    idle = [j for j in down if j["idle"]]
    unknown = [j for j in down if j["idle"] is None]
    notes = []
    if idle:
        notes.append(
            f"{len(idle)} of {len(judged)} downtrained while idle "
            f"({_show(min(j['cur_speed'] for j in idle))} GT/s now; power saving)"
        )
    if unknown:
        notes.append(
            f"{len(unknown)} of {len(judged)} below capability "
            f"({_show(min(j['cur_speed'] for j in unknown))} GT/s now), busy state not "
            "readable: judged on capability"
        )
    failing = [j["speed_why"] for j in judged if j["speed_ok"] is False]
    return {
        **spec,
        "measured": worst["speed"],
        "threshold": worst["need_speed"],
        "skip": "",
        "detail": "; ".join(failing[:3]) + extra,
        "note": "; ".join(notes) + extra if notes else extra.lstrip("; "),
    }


def _width(spec, judged, extra):
    worst = _worst(judged, "width_ok", "cur_width", "need_width")
    if worst is None:
        return {**spec, "measured": None, "threshold": None, "skip": "link width unknown"}
    failing = [j["width_why"] for j in judged if j["width_ok"] is False]
    return {
        **spec,
        "measured": worst["cur_width"],
        "threshold": worst["need_width"],
        "skip": "",
        "detail": "; ".join(failing[:3]) + extra,
        "note": extra.lstrip("; "),
    }


class FilterModule:
    def filters(self):
        return {"pocforge_pcie_checks": pcie_checks}
