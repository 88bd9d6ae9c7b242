"""Poison records: the sidecar stays up, each record ends in exactly one place.

Before issue 10, one record with ``delay-ms: --5`` raised out of ingest and put the
sidecar into a crash loop (every restart re-read it), and a crash mid-batch committed
offsets past a schedule that was never stored.
"""

from __future__ import annotations

import errno
import tempfile
from pathlib import Path
from typing import NoReturn

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from delaybridge.connectors import header_text
from delaybridge.contract.names import CONTROL_HEADERS, RMQ_UNIQ_KEY
from tests.unit.bridge.sidecar_kit import CANCELS, DELAY, DLT, ORDERS, FakeSidecar, schedule

DAY_MS = 86_400_000
T = ("delay-target-topic", ORDERS)
POISON: list[tuple[list[tuple[str, str | bytes]], str]] = [
    ([T, ("delay-ms", "--5")], "bad-time"),
    ([T, ("delay-ms", "²")], "bad-time"),
    ([T, ("delay-ms", "9" * 4_400)], "bad-time"),
    ([T, ("delay-ms", "5"), ("delay-target-partition", "4294967296")], "bad-partition"),
    ([T, ("delay-ms", "5"), ("delay-id", "x" * 65_536)], "bad-header"),
    ([T, ("delay-ms", "5"), ("n" * 65_536, "v")], "bad-header"),
    ([T, ("delay-ms", "5"), *[("h", "v")] * 65_536], "bad-header"),
    ([("delay-cancel", "c" * 65_536)], "bad-header"),
    ([("delay-cancel", "c"), ("delay-target-topic", "t" * 70_000)], "bad-target"),
    ([T, ("delay-ms", "5"), ("delay-id", b"\xff\xfe")], "bad-header"),
    ([("delay-target-topic", CANCELS), ("delay-ms", "5")], "bad-target"),
    ([("delay-target-topic", DLT), ("delay-ms", "5")], "bad-target"),
    ([("delay-target-topic", "__consumer_offsets"), ("delay-ms", "5")], "bad-target"),
]


def dead_letters(side: FakeSidecar) -> dict[str, str]:
    """origin -> delay-error of every dead letter."""
    out = {}
    for msg in side.cluster.records(DLT):
        headers = header_text(msg)
        out[headers["delay-origin"]] = headers["delay-error"]
    return out


def test_poison_records_are_dead_lettered_and_the_good_ones_around_them_stored(
    tmp_path: Path,
) -> None:
    side = FakeSidecar(tmp_path)
    first = side.send(schedule("good-1", 1_000))
    for headers, _reason in POISON:
        side.send(headers)  # type: ignore[arg-type]
    last = side.send(schedule("good-2", 1_000))
    side.turns(3)
    side.checkpoint()
    assert side.committed(0) == last + 1
    expected = {f"{DELAY}/0/{first + 1 + i}": reason for i, (_, reason) in enumerate(POISON)}
    assert dead_letters(side) == expected
    side.turns(3, advance_ms=600)
    assert [h["delay-id"] for h in side.delivered()] == ["good-1", "good-2"]
    side.stop()


def test_a_producer_clock_eight_days_ahead_is_clamped_not_a_crash(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path)
    ahead = side.clock.now_ms() + 8 * DAY_MS
    side.cluster.append(
        DELAY, 0, b"k", b"v", [T, ("delay-sec", str(364 * 86_400)), ("delay-id", "far")], ahead
    )
    side.turns(2)
    side.checkpoint()
    assert side.committed(0) == 1
    found = side.service.control.lookup("far")
    assert found is not None
    skew = side.service.settings.max_timestamp_skew_ms
    assert found["due_ms"] == side.clock.now_ms() + skew + 364 * DAY_MS
    side.stop()


def test_a_crash_mid_batch_never_commits_a_schedule_that_was_not_stored(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path)
    side.turns(1)  # partitions assigned
    side.send(schedule("kept", 60_000))  # offset 0
    side.send([T, ("delay-ms", "soon")])  # offset 1: a dead letter
    store = side.service.partitions.by_key[(DELAY, 0)].store

    def broken_disk(records: object) -> NoReturn:
        raise OSError(errno.EIO, "I/O error")

    store.append = broken_disk  # type: ignore[method-assign]
    with pytest.raises(OSError):
        side.turns(1)
    side.stop()  # the way down flushes and commits what is durable
    assert (side.committed(0) or 0) == 0  # offset 0 was never stored: re-read it


header_names = st.sampled_from(sorted(CONTROL_HEADERS | {RMQ_UNIQ_KEY, "trace", ""}))
header_values = st.one_of(
    st.none(),
    st.binary(max_size=40),
    st.integers(min_value=-(10**20), max_value=10**20).map(lambda i: str(i).encode()),
    st.sampled_from([b"orders", b"delay", b"dlt", b"cancels", b"2026-11-23T08:00:00Z", b"5s"]),
    st.sampled_from(
        [b"--5", "²".encode(), b"9" * 4_400, b"4294967296", b"-0", b" 7 ", b"x" * 70_000]
    ),
    st.text(max_size=20).map(str.encode),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=st.lists(
        st.tuples(
            st.lists(st.tuples(header_names, header_values), max_size=6),
            st.one_of(st.none(), st.binary(max_size=8)),
            st.one_of(st.none(), st.binary(max_size=8)),
            st.integers(min_value=0, max_value=2**45),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_any_record_ends_in_exactly_one_place(
    records: list[tuple[list[tuple[str, bytes | None]], bytes | None, bytes | None, int]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        side = FakeSidecar(Path(tmp))
        for headers, key, value, ts in records:
            side.cluster.append(DELAY, 0, key, value, headers, ts)
        side.turns(3)
        side.checkpoint()
        origins = [f"{DELAY}/0/{i}" for i in range(len(records))]
        dead = list(dead_letters(side))
        published = [orjson.loads(m.value() or b"{}") for m in side.cluster.records(CANCELS)]
        # A stored schedule with an id also publishes its replace: the same record, not
        # another place; only cancels count.
        cancels = [doc["origin"] for doc in published if not doc.get("replace")]
        stored = side.service.partitions.by_key[(DELAY, 0)].store.stats().appended_total
        assert len(set(dead)) == len(dead) and len(set(cancels)) == len(cancels)
        assert not set(dead) & set(cancels)
        assert set(dead) | set(cancels) <= set(origins)
        assert len(dead) + len(cancels) + stored == len(records)
        assert side.committed(0) == len(records)
        side.stop()


@pytest.mark.parametrize("name", ["delaybridge-retry", "delaybridge-store-corrupt"])
def test_a_producer_cannot_set_the_sidecars_internal_headers(tmp_path: Path, name: str) -> None:
    # A parked retry's state rides in the record's last header; a producer's garbage
    # there crashed the loop at delivery, and again at every restart.
    side = FakeSidecar(tmp_path)
    side.send([*schedule("x", 100), (name, "garbage{")])
    side.turns(3, advance_ms=200)
    (delivered,) = side.delivered()
    assert delivered["delay-id"] == "x" and name not in delivered
    side.stop()
