"""The event collector keeps every check's verdict, skips with their reasons included."""

from __future__ import annotations

from pocforge.cluster.events import EventCollector


def _ok(host, records):
    return {
        "event": "runner_on_ok",
        "event_data": {"host": host, "task": "Check | x", "res": {"pocforge_checks": records}},
    }


def test_skip_reason_is_kept_on_the_record(check_plugin):
    """The plugin's reason reaches CheckRecord.reason; skipped() lists them beside failures()."""
    collector = EventCollector("preflight.yml")
    skipped = check_plugin.record(
        {
            "check": "nvidia_fabricmanager",
            "measured": "unknown",
            "threshold": "active",
            "skip": "systemctl not found (no systemd on this host or container)",
        }
    )
    failed = check_plugin.record({"check": "gpu_count", "measured": 7, "threshold": 8})
    collector(_ok("h1", [skipped, failed]))
    result = collector.result
    (rec,) = result.skipped()
    assert (rec.host, rec.check, rec.status) == ("h1", "nvidia_fabricmanager", "skip")
    assert rec.reason == "systemctl not found (no systemd on this host or container)"
    assert [r.check for r in result.failures()] == ["gpu_count"]
    assert result.to_dict()["hosts"]["h1"]["checks"]["nvidia_fabricmanager"]["reason"] == (
        rec.reason
    )


def test_reason_read_from_the_message_of_older_records():
    """Records written before ``reason`` existed: the reason is taken from the message."""
    collector = EventCollector("preflight.yml")
    old = {"check": "gpu_count", "status": "skip", "message": "gpu_count: skipped: no GPU"}
    collector(_ok("h1", [old]))
    assert collector.result.hosts["h1"].checks["gpu_count"].reason == "no GPU"
