"""The fixed inputs of the golden files: what each format's file in this directory holds.

Plain values and :class:`~delaybridge.timerlog.TimerRecord` only (a name every build
since the store's first has), so that one file serves both sides: the generator that
wrote the golden bytes with the code of commit 505b445 (``README.md``) and the tests
that encode the same inputs with today's code and decode the golden bytes back
(``tests/unit/timerlog/test_golden_formats.py``).
"""

from __future__ import annotations

from delaybridge.timerlog import TimerRecord

START_MS = 1_700_000_000_000
DAY_MS = 86_400_000

SERIES_STATE = (
    b'{"first":1700000060000,"every":60000,"cron":null,"tz":"UTC","until":null,"count":5,"k":2}'
)
"""A series' stored state (``contract/series.py``'s ``state_header`` value, occurrence 2)."""

RECORDS = [
    # Compact layout: every field fits.
    TimerRecord(
        "order-1", START_MS + 5_000, "orders", 3, b"k1", b"hi", (("trace", b"abc"),), 41, START_MS
    ),
    # Compact: a null key, a null value (a tombstone to deliver), a header without a value.
    TimerRecord("order-2", START_MS + 100, "orders", -1, None, None, (("n", None),), 42, START_MS),
    # Compact: an empty key (not null), a series' state in its last header.
    TimerRecord(
        "series-3",
        START_MS + 60_000,
        "audit",
        0,
        b"",
        b"tick",
        (("delay-occurrence", b"2"), ("delaybridge-series", SERIES_STATE)),
        43,
        START_MS,
    ),
    # Compact: UTF-8 id and topic, due before it was sent (overdue: a negative delay).
    TimerRecord(
        "заказ-4", START_MS - 2_000, "orders.eu", 32_767, b"\x00\xff", b"v" * 300, (), 0, START_MS
    ),
    # Wide (the compact layout cannot hold it): an id of 300 bytes.
    TimerRecord("x" * 300, START_MS + 1, "orders", 1, b"k", b"v", (), 44, START_MS),
    # Wide: a partition past int16, a null key, an empty value.
    TimerRecord("order-6", START_MS + 2, "orders", 40_000, None, b"", (("h", b""),), 45, START_MS),
    # Wide: a delay past +-24.8 days and a source offset past 2**32.
    TimerRecord(
        "order-7", START_MS + 30 * DAY_MS, "orders", -1, b"k7", b"v7", (), 2**33 + 5, START_MS
    ),
]
"""Encoded once with the compact layout allowed (``commit_records.bin``: records 0-3
compact, 4-6 wide) and once without it (``commit_records_wide.bin``: all wide, as
format version 1 wrote them)."""

TIMER_ENTRIES = [
    # id_hash, prev, slot_ms, commit-log position, entry type (1 message, 2 roll, 3 rolled)
    (0x0000_0007, -1, START_MS + 100, 0, 1),
    (0xFFFF_FFFF, 1000, START_MS + 100, 4_096, 1),
    (0x1234_5678, -1, START_MS + DAY_MS, 2**40, 2),
    (0x8000_0000, 1001, START_MS + 100, 2**50 + 3, 3),
]
"""Version 1 (``timer_entries_v1.bin``): 32 bytes each, absolute fields."""

TIMER_BASES = (100, 4_096, START_MS)
"""Version 2 segment bases: tick_ms, commit-log base, base tick's time."""
TIMER_FIRST_INDEX = 2**32 + 1_000
TIMER_ENTRIES_V2 = [
    # id_hash, prev, slot_ms, commit-log position, entry type; indexes from TIMER_FIRST_INDEX
    (0x0000_0007, -1, START_MS, 4_096, 1),
    (0xFFFF_FFFF, TIMER_FIRST_INDEX, START_MS + 100, 4_096 + 200, 1),
    (0x1234_5678, -1, START_MS - 100 * 2**29, 4_096 + 2**32 - 1, 2),
    (0x8000_0000, TIMER_FIRST_INDEX + 1, START_MS + 100 * (2**29 - 1), 5_000, 3),
    (0x0000_0001, TIMER_FIRST_INDEX + 4 - (2**32 - 1), START_MS + 200, 4_097, 1),
]
"""Version 2 (``timer_entries_v2.bin``): 20 bytes each, relative to the bases; the
third and fourth sit at the edges of the tick range, the third at the commit-log
delta's largest value, the fifth's list points 2**32 - 1 entries back."""

# Cancel-log records, in file order (``cancel_records.bin``).
CANCEL_APPLIED = (5, START_MS + 100)
"""An applied cancel: the timer-log entry cancelled, its tick."""
CANCEL_WAITS = [
    # expires_ms, id, topic, sent_ms, offset, matched, replace
    (START_MS + 9_000, "id-1", None, None, None, False, False),
    (START_MS + 9_000, "id-2", "orders", START_MS, None, False, False),
    (START_MS + 9_000, "id-3", "orders", START_MS + 1, 17, True, True),
    (START_MS + 9_000, "id-4", "", 0, 0, False, False),
]
"""Waiting cancels (type WAITS): with no send time, with one, with every flag, with
zeros that are values (not absent)."""
CANCEL_RESOLVED = 64
CANCEL_MATCHED = 112

# Changelog records (``changelog_records.bin``): keys, values, a tombstone, progress.
CHANGELOG_KEYS = [(41, 0), (41, 3), (7, 1 << 32), (2**40, 2**64 - 1)]
"""(source offset, generation): 12 bytes, or 16 when the generation needs 64 bits."""
CHANGELOG_VALUES = [0, 4]
"""Records (indexes into :data:`RECORDS`, compact layout allowed) carried as values."""
TOMBSTONE_ID = "order-1"
PROGRESS_TICK_MS = START_MS + 5_000

CHECKPOINT_MARKS = {"source_resume": 7, "changelog": 41}
"""The owner's marks, in this key order (the order of ``StoreMarks``' fields)."""
CHECKPOINT = {
    "tick_ms": 100,
    "wheel_slots": 64,
    "commit_end": 12_345,
    "timer_end": 77,
    "live_start": 3,
    "done_tick_ms": START_MS + 1_000,
    "done_index": 4,
    "cancel_generation": 2,
    "cancel_end": 300,
    "last_source_offset": 99,
    "pending_by_topic": {"orders": 5, "audit": 1},
    "marks": CHECKPOINT_MARKS,
}
"""A checkpoint's own fields (``checkpoint.bin``); 505b445 took the marks as a dict."""
CHECKPOINT_COUNTERS = {
    "appended_total": 120,
    "delivered_total": 19,
    "cancelled_total": 5,
    "unknown_cancels_total": 1,
    "rolled_total": 30,
    "removed_total": 2,
    "corrupt_records_total": 1,
    "unreadable_records_total": 0,
    "replaced_total": 3,
}

WHEEL_SLOTS = [
    # count, time_ms, first, last
    (1, START_MS + 100, 0, 0),
    (3, START_MS + 200, 1, 7),
    (2**32 - 1, START_MS + DAY_MS, 2**40, 2**40 + 2**32 - 2),
]
"""Slots in use (``wheel_slots.bin``), their CRCs computed as the wheel does."""

FILE_HEADERS = [
    # kind's magic, version, entry_size, base, tick_ms, slots, stamp
    (b"DBCL", 2, 0, 6_120, 0, 0, 0),
    (b"DBCL", 1, 0, 0, 0, 0, 0),
    (b"DBTL", 2, 20, 3_200, 100, 4_096, START_MS),
    (b"DBTL", 1, 32, 0, 100, 64, 0),
    (b"DBWH", 1, 32, 0, 100, 64, 78),
    (b"DBCX", 2, 0, 0, 0, 0, 0),
    (b"DBTI", 1, 6, 1_600, 0, 0, 16),
]
"""One header per file kind and version (``file_headers.bin``)."""
