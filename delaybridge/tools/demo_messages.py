"""What the demo sends: its topics, its messages and their timeline."""

from __future__ import annotations

from dataclasses import dataclass

DELAY_TOPIC = "demo.delay"
TARGETS = ("demo.orders", "demo.reminders")
DLT = "demo.dead-letter"
CANCELLED = "order-1003"
RESCHEDULED = "remind-8"
RECURRING = "heartbeat-1"
#: heartbeat-1 repeats every 2 s, this many times.
RECURRING_COUNT = 3
#: order-1003 is cancelled, and remind-8 rescheduled, this long after sending (both are
#: due at 6 s; remind-8 moves to 1 s after its reschedule).
CANCEL_AFTER_MS = 2_000
#: How long arrivals are awaited, and how long after sending the watch lasts (past the
#: cancelled and the replaced message's due time, to show they do not arrive, and past
#: the recurring one's last occurrence).
ARRIVALS_TIMEOUT_S = 30.0
WATCH_MS = 8_000


@dataclass(frozen=True)
class DemoMessage:
    id: str
    target: str
    headers: tuple[tuple[str, str | bytes | None], ...]
    note: str


def messages_at(now_ms: int) -> list[DemoMessage]:
    return [
        native("order-1001", TARGETS[0], "delay-ms", "1500", "close unpaid order, 1.5 s"),
        native("order-1002", TARGETS[0], "delay-sec", "3", "close unpaid order, 3 s"),
        native("remind-7", TARGETS[1], "deliver-at-ms", str(now_ms + 4_000), "absolute time"),
        native(CANCELLED, TARGETS[0], "delay-ms", "6000", "cancelled at 2 s: never arrives"),
        native(RESCHEDULED, TARGETS[1], "delay-ms", "6000", "rescheduled at 2 s to 3 s"),
        DemoMessage(
            "rmq5-1",
            TARGETS[1],
            (("delay-target-topic", TARGETS[1]), ("TIMER_DELAY_SEC", "2"), ("UNIQ_KEY", "rmq5-1")),
            "RocketMQ 5 TIMER_DELAY_SEC",
        ),
        DemoMessage(
            "rmq4-1",
            TARGETS[1],
            (("delay-target-topic", TARGETS[1]), ("DELAY", "2"), ("delay-id", "rmq4-1")),
            "RocketMQ 4 level 2 (5 s)",
        ),
        DemoMessage(
            "etf1-1",
            TARGETS[0],
            (("scheduler-epoch", str(now_ms // 1000 + 5)), ("scheduler-target-topic", TARGETS[0])),
            "etf1 kafka-message-scheduler",
        ),
        native("past-1", TARGETS[0], "deliver-at-ms", str(now_ms - 60_000), "due a minute ago"),
        DemoMessage(
            RECURRING,
            TARGETS[1],
            (
                ("delay-target-topic", TARGETS[1]),
                ("delay-every", "2s"),
                ("delay-count", str(RECURRING_COUNT)),
                ("delay-id", RECURRING),
            ),
            f"recurring: every 2 s, {RECURRING_COUNT} times",
        ),
    ]


def native(id: str, target: str, header: str, value: str, note: str) -> DemoMessage:
    return DemoMessage(
        id, target, (("delay-target-topic", target), (header, value), ("delay-id", id)), note
    )


def rescheduled() -> DemoMessage:
    """The record that moves remind-8: the same id, a new time (it replaces the first)."""
    return native(RESCHEDULED, TARGETS[1], "delay-ms", "1000", "moved to 1 s from now")
