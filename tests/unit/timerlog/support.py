"""Helpers the store's tests share: a record factory and a drain loop.

A simulated crash is the store's own :meth:`TimerStore.abandon` (drop it like kill -9:
no flush, no clean stamp), not something these helpers re-implement.
"""

from __future__ import annotations

from delaybridge.timerlog import Headers, TimerRecord, TimerStore

START_MS = 1_700_000_000_000
#: The cancel grace period of the ``graced`` settings (conftest).
GRACE_MS = 5_000


def rec(
    id: str,
    due_ms: int,
    *,
    topic: str = "orders",
    offset: int = 0,
    value: bytes | None = b"v" * 100,
    key: bytes | None = b"k",
    headers: Headers = (("trace", b"1"),),
    partition: int = -1,
) -> TimerRecord:
    return TimerRecord(id, due_ms, topic, partition, key, value, headers, offset, START_MS)


def drain(store: TimerStore, batch: int = 1000) -> list[TimerRecord]:
    """Take everything due now and mark it delivered."""
    out: list[TimerRecord] = []
    while got := store.take_due(batch):
        out += [d.record for d in got]
        store.mark_delivered(got[-1].cursor)
    return out
