"""DelayClient's producer calls on a real broker, with a real sidecar delivering.

Pass criteria, in numbers: every scheduled message delivered (lost 0), none before its
due time (early 0), no cancelled or replaced message delivered (cancelled delivered 0),
and each one on the time the client asked for.
"""

from __future__ import annotations

import itertools
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from delaybridge.client import DelayClient
from tests.integration.sidecar.harness import Arrival, InProcessSidecar, Topics, Watcher, now_ms

pytestmark = pytest.mark.kafka


def early(arrivals: list[Arrival]) -> list[str]:
    return [a.id for a in arrivals if a.timestamp_ms < a.due_ms]


def test_schedule_delivers_a_delay_an_instant_and_two_series_on_time(
    kafka: Any, topics: Topics, sidecar: InProcessSidecar, watcher: Watcher
) -> None:
    orders, reminders = topics.targets
    with DelayClient.connect(kafka.bootstrap_servers, topics.delay) as client:
        sent_ms = now_ms()
        client.schedule(
            orders, b"d", key=b"k1", headers=[("trace", "t1")], delay=timedelta(seconds=1), id="d"
        )
        at = datetime.now(UTC) + timedelta(seconds=2)
        client.schedule(orders, b"a", at=at, id="a", partition=1)
        client.schedule(reminders, b"s", every=timedelta(seconds=1), count=3, id="s")
        # A cron series whose first occurrence is given: once, at that instant.
        first = datetime.now(UTC) + timedelta(seconds=1)
        client.schedule(reminders, b"c", at=first, cron="0 9 * * *", tz="Europe/Paris", id="c")
        client.cancel("c", target=reminders)  # a cancel by id stops a series: c never comes

    watcher.until(lambda a: len(a) >= 5, 30, "d, a and three occurrences of s")
    watcher.settle(1.5)
    got = Counter(a.id for a in watcher.arrivals)
    assert got == Counter({"d": 1, "a": 1, "s": 3})  # lost 0, cancelled delivered 0
    assert early(watcher.arrivals) == []  # early 0
    by_id = {a.id: a for a in watcher.arrivals}
    assert (by_id["d"].key, by_id["d"].headers["trace"]) == (b"k1", "t1")
    assert by_id["d"].due_ms >= sent_ms + 1_000
    assert by_id["a"].due_ms == -(-int(at.timestamp() * 1_000_000) // 1000)
    assert by_id["a"].partition == 1
    series = sorted((a for a in watcher.arrivals if a.id == "s"), key=lambda a: a.due_ms)
    assert [a.headers["delay-occurrence"] for a in series] == ["1", "2", "3"]
    assert [b.due_ms - a.due_ms for a, b in itertools.pairwise(series)] == [1000, 1000]


def test_cancel_takes_the_message_of_its_id_and_target_only(
    kafka: Any, topics: Topics, sidecar: InProcessSidecar, watcher: Watcher
) -> None:
    orders, reminders = topics.targets
    with DelayClient.connect(kafka.bootstrap_servers, topics.delay) as client:
        for id in ("keep", "gone", "other-target"):
            client.schedule(orders, id, id=id, delay=timedelta(seconds=2))
        client.cancel("gone")
        client.cancel("other-target", target=reminders)  # names another target: no match
        client.cancel("never-sent")  # harmless

    watcher.until(lambda a: len(a) >= 2, 30, "keep and other-target")
    watcher.settle(1.5)  # past the cancelled one's due time (the same as theirs)
    assert sorted(a.id for a in watcher.arrivals) == ["keep", "other-target"]
    assert early(watcher.arrivals) == []


def test_reschedule_moves_a_message_earlier_and_later_and_it_arrives_once(
    kafka: Any, topics: Topics, sidecar: InProcessSidecar, watcher: Watcher
) -> None:
    orders = topics.targets[0]
    with DelayClient.connect(kafka.bootstrap_servers, topics.delay) as client:
        client.schedule(orders, b"old", key=b"k", id="sooner", delay=timedelta(seconds=6))
        client.schedule(orders, b"old", key=b"k", id="later", delay=timedelta(seconds=1))
        old_due_ms = now_ms() + 6_000
        moved_ms = now_ms()
        client.reschedule("sooner", orders, b"new", key=b"k", delay=timedelta(seconds=1))
        client.reschedule("later", orders, b"new", key=b"k", delay=timedelta(seconds=3))

    watcher.until(lambda a: len(a) >= 2, 30, "both moved messages")
    watcher.until(lambda a: now_ms() > old_due_ms + 1_000, 30, "past the old due time")
    assert sorted((a.id, a.value) for a in watcher.arrivals) == [
        ("later", b"new"),
        ("sooner", b"new"),
    ]  # once each, the replaced ones never
    assert early(watcher.arrivals) == []
    by_id = {a.id: a for a in watcher.arrivals}
    assert moved_ms + 1_000 <= by_id["sooner"].due_ms < moved_ms + 3_000
    assert by_id["later"].due_ms >= moved_ms + 3_000


def test_cancel_prefix_takes_the_family_and_jitter_spreads_after_the_asked_time(
    kafka: Any, topics: Topics, sidecar: InProcessSidecar, watcher: Watcher
) -> None:
    # cancel_prefix: every pending message whose id starts with the prefix and was sent
    # before it, whatever its partition; jitter: due up to that long after the asked
    # time, by a hash of the id (never before it).
    from delaybridge.contract.jitter import spread_ms

    orders = topics.targets[0]
    with DelayClient.connect(kafka.bootstrap_servers, topics.delay) as client:
        first_sent = now_ms()
        for i in range(6):
            client.schedule(orders, b"v", id=f"shop-7/{i}", delay=timedelta(seconds=2))
            client.schedule(
                orders,
                b"v",
                id=f"shop-8/{i}",
                delay=timedelta(seconds=2),
                jitter=timedelta(seconds=1),
            )
        sent_within = now_ms() - first_sent
        client.cancel_prefix("shop-7/")

    watcher.until(lambda a: len(a) >= 6, 30, "the six of shop-8")
    watcher.settle(1.5)  # past shop-7's due time (the same as shop-8's asked time)
    assert sorted(a.id for a in watcher.arrivals) == [f"shop-8/{i}" for i in range(6)]
    assert early(watcher.arrivals) == []
    # Take each one's offset away and the asked times (send time + 2 s) lie within the
    # time the sends took; the offsets themselves differ by up to the second (87 to
    # 945 ms for these six ids).
    asked = [a.due_ms - spread_ms(a.id, 1_000) for a in watcher.arrivals]
    assert max(asked) - min(asked) <= sent_within + 50, (asked, sent_within)
