"""Decoding dead-letter records and paging through them (no broker)."""

from __future__ import annotations

import base64

from delaybridge.console.dead_letters import Cursor, DeadLetter, decode, page_from


def letter(p: int, offset: int, ts: int, reason: str) -> DeadLetter:
    return decode(p, offset, ts, None, b"v", [("delay-error", reason.encode())])


def test_decode_splits_ours_from_the_producers_headers() -> None:
    d = decode(
        2,
        17,
        1_000,
        b"\xff\x00key",
        b"value",
        [
            ("delay-target-topic", b"orders"),
            ("deliver-at", b"tomorrow"),
            ("blob", b"\x80\x81"),
            ("empty", None),
            ("delay-error", b"bad-time"),
            ("delay-error-detail", b"header deliver-at: expected RFC 3339"),
            ("delay-origin", b"delay/0/5"),
        ],
    )
    assert (d.partition, d.offset, d.timestamp_ms) == (2, 17, 1_000)
    assert d.reason == "bad-time"
    assert d.detail == "header deliver-at: expected RFC 3339"
    assert d.origin == "delay/0/5"
    assert d.key == "base64:" + base64.b64encode(b"\xff\x00key").decode()
    assert d.value == b"value" and d.value_bytes == 5
    assert d.headers == [
        ("delay-target-topic", "orders"),
        ("deliver-at", "tomorrow"),
        ("blob", "base64:gIE="),
        ("empty", None),
    ]
    assert d.value_dropped_bytes is None and d.headers_dropped is None


def test_decode_a_shrunk_or_foreign_record() -> None:
    shrunk = decode(
        0,
        1,
        5,
        None,
        None,
        [
            ("delay-error", b"record-too-large"),
            ("delay-error-value-dropped", b"2000000"),
            ("delay-error-headers-dropped", b"3"),
        ],
    )
    assert shrunk.value_dropped_bytes == 2_000_000 and shrunk.headers_dropped == 3
    assert shrunk.value is None and shrunk.value_bytes is None
    foreign = decode(0, 2, 5, None, b"x", [("delay-error-value-dropped", b"many")])
    assert foreign.reason == "(none)" and foreign.value_dropped_bytes is None


def test_page_newest_first_filtered_with_a_cursor_per_partition() -> None:
    read = {
        0: [
            letter(0, o, 100 + o, "bad-time" if o % 2 else "missing-target") for o in range(10, 20)
        ],
        1: [letter(1, o, 200 + o, "bad-time") for o in range(0, 5)],
    }
    starts = {0: 10, 1: 0}
    lows = {0: 0, 1: 0}
    shown, counts, cursor = page_from(read, starts, lows, "bad-time", limit=6)
    assert counts == {"bad-time": 10, "missing-target": 5}
    assert [(d.partition, d.offset) for d in shown] == [
        (1, 4),
        (1, 3),
        (1, 2),
        (1, 1),
        (1, 0),
        (0, 19),
    ]
    # Partition 0 has matches not shown (17, 15, ...): the next page ends at 19;
    # partition 1 was read to its low watermark and has none left.
    assert cursor == Cursor({0: 19})
    everything, _, rest = page_from(read, starts, lows, None, limit=100)
    assert len(everything) == 15 and rest == Cursor({0: 10}), "older records remain in 0"


def test_a_partition_whose_matches_were_all_cut_resumes_after_the_newest_of_them() -> None:
    read = {0: [letter(0, o, o, "a") for o in range(5)], 1: [letter(1, 9, 100, "a")]}
    shown, _, cursor = page_from(read, {0: 0, 1: 9}, {0: 0, 1: 0}, "a", limit=1)
    assert [(d.partition, d.offset) for d in shown] == [(1, 9)]
    assert cursor == Cursor({0: 5, 1: 9})


def test_cursor_round_trip() -> None:
    cursor = Cursor({3: 40, 0: 7})
    assert cursor.encode() == "0:7,3:40"
    assert Cursor.decode(cursor.encode()) == cursor
    try:
        Cursor.decode("0:x")
    except Exception as exc:
        assert "not a dead-letter cursor" in str(exc)
    else:
        raise AssertionError("a bad cursor was accepted")
