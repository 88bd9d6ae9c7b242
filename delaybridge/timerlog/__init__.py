"""The store of one delay-topic partition: commit log, timer log, time wheel.

Public names::

    TimerStore.open(directory, StoreSettings(), clock) -> TimerStore
    store.append([TimerRecord, ...]); store.cancel([Cancel(id, topic, sent_ms, offset), ...])
    store.flush()                      # durability point (fsync + checkpoint)
    store.take_due(n) -> [DueRecord]   # in delivery order, bounded batches
    store.mark_delivered(cursor)       # durable at the next flush
    store.next_due_ms(), store.lookup(id), store.close()
    store.stats() -> StoreStats        # store.counters: the StoreCounters it extends
    store.abandon()                    # drop it like kill -9 (crash tests, benchmarks)

One owner thread calls every method. The formats and the recovery protocol are in
docs/storage.md.
"""

from delaybridge.timerlog.clock import SYSTEM_CLOCK, Clock, ManualClock, SystemClock
from delaybridge.timerlog.marks import StoreMarks
from delaybridge.timerlog.records import (
    Cancel,
    DamagedRecord,
    DeliveryCursor,
    DueRecord,
    EncodedBatch,
    Headers,
    TimerRecord,
)
from delaybridge.timerlog.settings import StoreSettings
from delaybridge.timerlog.stats import StoreCounters, StoreStats
from delaybridge.timerlog.store import TimerStore

__all__ = [
    "SYSTEM_CLOCK",
    "Cancel",
    "Clock",
    "DamagedRecord",
    "DeliveryCursor",
    "DueRecord",
    "EncodedBatch",
    "Headers",
    "ManualClock",
    "StoreCounters",
    "StoreMarks",
    "StoreSettings",
    "StoreStats",
    "SystemClock",
    "TimerRecord",
    "TimerStore",
]
