"""The header contract (DESIGN §2), one rule per test."""

from __future__ import annotations

import pytest

from delaybridge.contract.classify import (
    Cancel,
    Rejected,
    Schedule,
    SourceRecord,
    classify,
    delivered_headers,
)
from delaybridge.contract.reasons import Reason
from delaybridge.contract.rules import HeaderRules
from delaybridge.settings import DEFAULT_DELAY_LEVELS

# Once per implementation of the hot path: pure Python, and compiled where built
# (tests/unit/hot_impl.py).
pytestmark = pytest.mark.usefixtures("hot_impl")

TS = 1_700_000_000_000
RULES = HeaderRules.from_strings(
    DEFAULT_DELAY_LEVELS,
    max_delay_ms=365 * 86_400_000,
    routes={"routed": "orders"},
    delay_topics=("delay", "routed"),
)


def rec(
    *headers: tuple[str, str | bytes | None],
    key: bytes | None = b"k",
    value: bytes | None = b"v",
    topic: str = "delay",
) -> SourceRecord:
    hs = tuple((n, v.encode() if isinstance(v, str) else v) for n, v in headers)
    return SourceRecord(topic, 3, 42, TS, key, value, hs)


def schedule(*headers: tuple[str, str | bytes | None], **kw: object) -> Schedule:
    decision = classify(rec(*headers, **kw), RULES)  # type: ignore[arg-type]
    assert isinstance(decision, Schedule), decision
    return decision


def rejected(*headers: tuple[str, str | bytes | None], **kw: object) -> Rejected:
    decision = classify(rec(*headers, **kw), RULES)  # type: ignore[arg-type]
    assert isinstance(decision, Rejected), decision
    return decision


T = ("delay-target-topic", "orders")


@pytest.mark.parametrize(
    ("header", "value", "due"),
    [
        ("delay-ms", "1500", TS + 1500),
        ("delay-sec", "30", TS + 30_000),
        ("deliver-at-ms", str(TS + 7), TS + 7),
        ("deliver-at", "2023-11-14T22:13:20.250Z", TS + 250),
        ("deliver-at", "2023-11-15T00:13:20+02:00", TS),
        ("TIMER_DELIVER_MS", str(TS + 9), TS + 9),
        ("TIMER_DELAY_MS", "250", TS + 250),
        ("TIMER_DELAY_SEC", "2", TS + 2000),
        ("DELAY", "3", TS + 10_000),
        ("DELAY", "18", TS + 7_200_000),
        ("DELAY", "99", TS + 7_200_000),  # clamped to the maximum, as RocketMQ does
        ("DELAY", "0", TS),
        ("scheduler-epoch", str(TS // 1000 + 60), TS + 60_000),
    ],
)
def test_each_timing_header(header: str, value: str, due: int) -> None:
    s = schedule(T, (header, value))
    assert s.due_ms == due
    assert s.target_topic == "orders"
    # etf1 records are keyed by their schedule id; the others default to topic-partition-offset
    assert s.id == ("k" if header == "scheduler-epoch" else "delay-3-42")
    assert s.target_partition == -1


def test_precedence_absolute_native_first() -> None:
    s = schedule(
        T,
        ("DELAY", "1"),
        ("delay-sec", "9"),
        ("delay-ms", "5"),
        ("deliver-at-ms", str(TS + 1)),
        ("TIMER_DELIVER_MS", str(TS + 2)),
    )
    assert s.due_ms == TS + 1
    assert schedule(T, ("delay-sec", "9"), ("delay-ms", "5")).due_ms == TS + 5
    assert schedule(T, ("TIMER_DELAY_SEC", "9"), ("delay-sec", "1")).due_ms == TS + 1000
    assert schedule(T, ("scheduler-epoch", "1"), ("DELAY", "1")).due_ms == TS + 1000


def test_past_due_is_accepted_as_is() -> None:
    assert schedule(T, ("deliver-at-ms", "5")).due_ms == 5


def test_control_headers_stripped_user_headers_kept() -> None:
    s = schedule(T, ("delay-ms", "1"), ("trace", "abc"), ("delay-id", "order-7"), ("n", None))
    assert s.headers == (("trace", b"abc"), ("n", None))
    assert s.id == "order-7"
    out = delivered_headers(s.headers, s.id, "delay/3/42", s.due_ms)
    assert out[-3:] == [
        ("delay-id", b"order-7"),
        ("delay-origin", b"delay/3/42"),
        ("delay-due-ms", str(TS + 1).encode()),
    ]


def test_rocketmq_uniq_key_is_the_id_and_kept() -> None:
    s = schedule(T, ("TIMER_DELAY_SEC", "1"), ("UNIQ_KEY", "AC11000100002A9F"))
    assert s.id == "AC11000100002A9F"
    assert ("UNIQ_KEY", b"AC11000100002A9F") in s.headers


def test_an_explicit_id_replaces_unless_asked_to_keep() -> None:
    assert schedule(T, ("delay-ms", "1"), ("delay-id", "a")).replace
    assert schedule(T, ("TIMER_DELAY_SEC", "1"), ("UNIQ_KEY", "u")).replace
    assert schedule(("scheduler-epoch", "1"), ("scheduler-target-topic", "orders")).replace
    assert not schedule(T, ("delay-ms", "1")).replace  # the default id is unique
    assert not schedule(
        T, ("delay-ms", "1"), ("delay-id", "a"), ("delay-on-duplicate", "KEEP")
    ).replace
    r = rejected(T, ("delay-ms", "1"), ("delay-id", "a"), ("delay-on-duplicate", "both"))
    assert r.reason is Reason.BAD_HEADER and "delay-on-duplicate" in r.detail


def test_target_partition() -> None:
    assert schedule(T, ("delay-ms", "1"), ("delay-target-partition", "4")).target_partition == 4
    r = rejected(T, ("delay-ms", "1"), ("delay-target-partition", "x"))
    assert r.reason is Reason.BAD_PARTITION and "delay-target-partition" in r.detail


def test_route_used_without_target_header() -> None:
    assert schedule(("delay-ms", "1"), topic="routed").target_topic == "orders"
    r = rejected(("delay-ms", "1"))
    assert r.reason is Reason.MISSING_TARGET and "'delay'" in r.detail


def test_etf1_schedule_and_tombstone_cancel() -> None:
    s = schedule(
        ("scheduler-epoch", str(TS // 1000 + 5)),
        ("scheduler-target-topic", "orders"),
        ("scheduler-target-key", "order-1"),
        key=b"sched-9",
    )
    assert (s.id, s.key, s.target_topic, s.due_ms) == ("sched-9", b"order-1", "orders", TS + 5000)
    assert classify(rec(key=b"sched-9", value=None), RULES) == Cancel("sched-9", None)


def test_cancels() -> None:
    assert classify(rec(("delay-cancel", "a")), RULES) == Cancel("a", None)
    assert classify(rec(("TIMER_DEL_UNIQKEY", "b"), T), RULES) == Cancel("b", "orders")


@pytest.mark.parametrize(
    ("headers", "reason", "names"),
    [
        ((T, ("delay-ms", "soon")), Reason.BAD_TIME, "delay-ms"),
        ((T, ("delay-ms", "-5")), Reason.BAD_TIME, "delay-ms"),
        ((T, ("deliver-at", "2024-01-01T00:00:00")), Reason.BAD_TIME, "deliver-at"),
        ((T,), Reason.BAD_TIME, "no timing header"),
        ((T, ("delay-ms", "1"), ("delay-ms", "2")), Reason.CONFLICTING_TIME, "delay-ms"),
        ((T, ("delay-sec", str(366 * 86_400))), Reason.DELAY_TOO_LONG, "delay-sec"),
        ((T, ("DELAY", "-1")), Reason.UNKNOWN_DELAY_LEVEL, "DELAY"),
        ((T, ("DELAY", "two")), Reason.UNKNOWN_DELAY_LEVEL, "DELAY"),
        ((("delay-target-topic", "bad topic!"), ("delay-ms", "1")), Reason.BAD_TARGET, "bad"),
        ((("delay-target-topic", "delay"), ("delay-ms", "1")), Reason.TARGET_IS_DELAY_TOPIC, ""),
        ((T, ("delay-ms", b"\xff")), Reason.BAD_HEADER, "delay-ms"),
        ((T, ("delay-ms", None)), Reason.BAD_HEADER, "delay-ms"),
    ],
)
def test_bad_input(
    headers: tuple[tuple[str, str | bytes | None], ...], reason: Reason, names: str
) -> None:
    r = rejected(*headers)
    assert r.reason is reason
    assert names in r.detail


def test_null_value_with_timing_is_a_scheduled_tombstone() -> None:
    s = schedule(T, ("delay-ms", "1"), value=None)
    assert s.target_topic == "orders"
