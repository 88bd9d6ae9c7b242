"""``delay-expire-after`` through the whole sidecar on the fake edge: a message that cannot
go out by its deadline is dead-lettered as ``expired``, at its first try or at a retry,
and one delivered in time carries none of the sidecar's own headers."""

from __future__ import annotations

from pathlib import Path

from delaybridge.connectors import header_text
from tests.unit.bridge.sidecar_kit import DLT, FakeSidecar, schedule


def expiring(id: str, delay_ms: int, after: str, target: str = "orders") -> list[tuple[str, str]]:
    return [*schedule(id, delay_ms, target), ("delay-expire-after", after)]


def reasons(side: FakeSidecar) -> dict[str, str]:
    out = {}
    for msg in side.cluster.records(DLT):
        headers = header_text(msg)
        out[headers["delay-id"]] = headers["delay-error"]
    return out


def test_a_message_past_its_deadline_is_dead_lettered_as_expired(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path)
    side.send(expiring("late", 1_000, "2s"))
    side.send(expiring("still-in-time", 1_000, "30s"))
    side.send(schedule("never-expires", 1_000))
    side.turns(2)  # stored
    side.clock.advance(10_000)  # an outage: 9 s past due when the sidecar turns again
    side.turns(3)
    assert sorted(h["delay-id"] for h in side.delivered()) == ["never-expires", "still-in-time"]
    assert reasons(side) == {"late": "expired"}
    (dead,) = side.cluster.records(DLT)
    headers = header_text(dead)
    assert "expired at" in headers["delay-error-detail"]
    assert headers["delay-origin"].startswith("delay/0/")
    side.checkpoint()
    expired = side.service.metrics.registry.get_sample_value(
        "delaybridge_dead_lettered_total", {"reason": "expired"}
    )
    assert expired == 1
    side.stop()


def test_a_message_delivered_in_time_carries_no_deadline_header(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path)
    side.send(expiring("ok", 500, "1m"))
    side.turns(3, advance_ms=300)
    (delivered,) = side.delivered()
    assert delivered["delay-id"] == "ok"
    assert not any(name.startswith("delaybridge-") for name in delivered)
    assert "delay-expire-after" not in delivered
    side.stop()


def test_a_retry_past_the_deadline_expires_instead_of_going_out(tmp_path: Path) -> None:
    # A target missing: parked and retried (0.5 s doubling); the parked copy keeps its
    # deadline, and the retry after it dead-letters the message as expired, before the
    # missing topic's own window (60 s) would have.
    side = FakeSidecar(tmp_path, delivery={"missing_topic_retry_ms": 60_000})
    side.send(expiring("gone", 100, "5s", target="no-such-topic"))
    side.turns(2, advance_ms=200)
    assert reasons(side) == {}  # parked, inside its deadline
    side.turns(6, advance_ms=2_000)
    assert reasons(side) == {"gone": "expired"}
    side.stop()
