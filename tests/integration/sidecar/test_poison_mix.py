"""Issue 10, acceptance: good records mixed with every poison record, on a real broker.

A real ``delaybridge run`` process reads one delay topic into which kcat (and, for what
kcat cannot write, confluent-kafka) puts every kind of hostile record issue 10 found:
before it, the first of them (``delay-ms: --5``) put the sidecar into a crash loop. The
process must stay up the whole run, deliver every good record once and never early,
dead-letter every bad one with its reason code, skip garbage on the cancel topic, and
commit every delay-topic partition to its end (nothing blocked): at-least-once and in
exactly-once mode (side writes inside Kafka transactions).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from delaybridge.settings import Settings
from tests.integration.sidecar.harness import SubprocessSidecar, Topics, Watcher, now_ms
from tests.integration.sidecar.kcat import Header, kcat_produce
from tests.integration.sidecar.observe import (
    alive,
    committed,
    high_watermarks,
    http,
    lookup,
    metric,
    metric_by_worker,
    metric_reaches,
    this_run,
)
from tests.support import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

DAY_MS = 86_400_000
SKEW_MS = 5_000  # max_timestamp_skew_ms of this sidecar: a clamped record is out in seconds
PARTITIONS = 3


@pytest.fixture
def topics(kafka: Any) -> Topics:
    # A producer clock days ahead must reach the sidecar: Kafka 4 refuses timestamps more
    # than an hour ahead by default (message.timestamp.after.max.ms).
    return Topics(
        delay=kafka.create_topic(
            "delay", partitions=PARTITIONS, config={"message.timestamp.after.max.ms": str(2**62)}
        ),
        targets=[kafka.create_topic("orders", partitions=2)],
        dead_letter=kafka.create_topic("dlt"),
        cancels=kafka.create_topic("cancels"),
    )


def kcat_poison(t: Topics) -> dict[str, tuple[list[Header], str]]:
    """Value of the record -> (its headers, the reason code it must be dead-lettered with)."""
    to = ("delay-target-topic", t.targets[0])
    soon = ("delay-ms", "5")
    return {
        "minus-minus": ([to, ("delay-ms", "--5")], "bad-time"),
        "superscript-two": ([to, ("delay-ms", "²")], "bad-time"),
        "digits-4400": ([to, ("delay-ms", "9" * 4_400)], "bad-time"),
        "rmq-superscript": ([to, ("TIMER_DELAY_MS", "²")], "bad-time"),
        "negative-delay": ([to, ("delay-ms", "-5")], "bad-time"),
        "rfc3339-no-zone": ([to, ("deliver-at", "2030-01-01T00:00:00")], "bad-time"),
        "two-delays": ([to, ("delay-ms", "1"), ("delay-ms", "2")], "conflicting-time"),
        "over-a-year": ([to, ("delay-sec", str(400 * 86_400))], "delay-too-long"),
        "level-x": ([to, ("DELAY", "x")], "unknown-delay-level"),
        "no-target": ([soon], "missing-target"),
        "partition-2^32": ([to, soon, ("delay-target-partition", "4294967296")], "bad-partition"),
        "partition-minus-1": ([to, soon, ("delay-target-partition", "-1")], "bad-partition"),
        "id-65536-bytes": ([to, soon, ("delay-id", "i" * 65_536)], "bad-header"),
        "name-65536-bytes": ([to, soon, ("n" * 65_536, "v")], "bad-header"),
        "not-utf8": ([to, ("delay-ms", b"\xff\xfe")], "bad-header"),
        "cancel-65536-bytes": ([("delay-cancel", "c" * 65_536)], "bad-header"),
        "cancel-bad-target": ([("delay-cancel", "c"), ("delay-target-topic", "a b")], "bad-target"),
        "to-cancel-topic": ([("delay-target-topic", t.cancels), soon], "bad-target"),
        "to-dead-letter-topic": ([("delay-target-topic", t.dead_letter), soon], "bad-target"),
        "to-kafka-internal": ([("delay-target-topic", "__consumer_offsets"), soon], "bad-target"),
        "to-delay-topic": ([("delay-target-topic", t.delay), soon], "target-is-delay-topic"),
    }


def python_poison(t: Topics) -> dict[str, tuple[bytes | None, list[Any], str]]:
    """What kcat cannot write: name -> (key, headers, reason); the value is the name, or
    None for an etf1 tombstone (named by its key)."""
    to = ("delay-target-topic", t.targets[0])
    return {
        "headers-65536": (b"k", [to, ("delay-ms", "5"), *[("h", b"v")] * 65_536], "bad-header"),
        "null-delay-ms": (b"k", [to, ("delay-ms", None)], "bad-header"),
        "tombstone-key-70000-bytes": (b"e" * 70_000, [], "bad-header"),
    }


@pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])
def test_good_records_mixed_with_every_poison(
    kafka: Any,
    topics: Topics,
    tmp_path: Path,
    make_settings: Callable[..., Settings],
    exactly_once: bool,
) -> None:
    bootstrap = kafka.bootstrap_servers
    delay = topics.delay
    orders = topics.targets[0]
    settings = make_settings(max_timestamp_skew_ms=SKEW_MS, delivery={"exactly_once": exactly_once})
    side = SubprocessSidecar(settings, tmp_path)
    side.start()
    client = http(side)
    side.wait_log("assigned", 60)
    watcher = Watcher(bootstrap, [orders, topics.dead_letter])
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})

    def produce(value: bytes | None, headers: list[Any], partition: int, **kw: Any) -> None:
        producer.produce(delay, value, partition=partition, headers=headers, **kw)
        assert producer.flush(30) == 0, "not acknowledged"  # in order with kcat's records

    good: set[str] = set()

    def good_one(id: str, partition: int) -> None:
        headers = [("delay-target-topic", orders), ("delay-ms", "1000"), ("delay-id", id)]
        produce(id.encode(), headers, partition, key=id.encode())
        good.add(id)

    # A cancel with its victim first (the victim is due after everything else is sent),
    # the cancel in another partition than its message.
    produce(
        b"victim",
        [("delay-target-topic", orders), ("delay-ms", "20000"), ("delay-id", "victim")],
        0,
    )
    kcat_produce(bootstrap, delay, b"cancel", [("delay-cancel", "victim")], partition=2)
    expected: dict[str, str] = {}
    for i, (name, (headers, reason)) in enumerate(kcat_poison(topics).items()):
        good_one(f"good-{i}-before", i % PARTITIONS)
        kcat_produce(bootstrap, delay, name.encode(), headers, key=b"k", partition=i % PARTITIONS)
        good_one(f"good-{i}-after", i % PARTITIONS)
        expected[name] = reason
    for i, (name, (key, headers, reason)) in enumerate(python_poison(topics).items()):
        value = None if name.startswith("tombstone") else name.encode()
        produce(value, headers, i % PARTITIONS, key=key)
        good_one(f"good-py-{i}", i % PARTITIONS)
        expected[name] = reason
    # A producer clock 30 days ahead is clamped to the sidecar's clock + skew.
    sent_ms = now_ms()
    ahead = {"timestamp": sent_ms + 30 * DAY_MS, "key": b"k"}
    to = ("delay-target-topic", orders)
    produce(b"ahead-soon", [to, ("delay-ms", "500"), ("delay-id", "ahead-soon")], 1, **ahead)
    produce(
        b"ahead-long",
        [to, ("delay-sec", str(364 * 86_400)), ("delay-id", "ahead-long")],
        1,
        **ahead,
    )
    good.add("ahead-soon")
    # Garbage on the cancel topic: every replica reads it, none may crash on it.
    garbage = [
        b'{"id":"x","target_topic":1}',
        b"not json",
        b"[1,2]",
        b'{"id":"' + b"x" * 70_000 + b'"}',
    ]
    for value in garbage:
        kcat_produce(bootstrap, topics.cancels, value)

    def dead_letters() -> dict[str, list[dict[str, str]]]:
        """name of the poison record -> the headers of each of its dead letters"""
        out: dict[str, list[dict[str, str]]] = {}
        for a in watcher.arrivals:
            if a.topic == topics.dead_letter:
                name = "tombstone-key-70000-bytes" if a.value is None else a.value.decode()
                out.setdefault(name, []).append(a.headers)
        return out

    def everything_out(_: object) -> bool:
        alive(side)
        return set(watcher.ids(orders)) >= good and set(dead_letters()) >= set(expected)

    def victim_gone() -> bool:
        alive(side)
        return lookup(client, "victim") is None

    watcher.until(everything_out, 90, "every good record delivered, every bad one dead-lettered")
    wait_until(victim_gone, 30, "the victim cancelled")
    watcher.settle(2.0)
    alive(side)

    delivered = Counter(watcher.ids(orders))
    assert set(delivered) == good, f"unexpected deliveries: {set(delivered) - good}"
    assert all(n == 1 for n in delivered.values()), "a record delivered twice without a restart"
    early = [a.id for a in watcher.arrivals if a.topic == orders and a.timestamp_ms < a.due_ms]
    assert not early
    dead = dead_letters()
    assert {name: len(each) for name, each in dead.items()} == dict.fromkeys(expected, 1)
    for name, reason in expected.items():
        (got,) = dead[name]
        assert got.get("delay-error") == reason, (name, got.get("delay-error-detail"))
        assert got["delay-error-detail"]
        assert got["delay-origin"].startswith(f"{delay}/")

    ahead_soon = next(a for a in watcher.arrivals if a.id == "ahead-soon")
    assert ahead_soon.due_ms <= now_ms(), "clamped to our clock, not 30 days ahead"
    assert sent_ms + 500 <= ahead_soon.due_ms <= sent_ms + SKEW_MS + 500 + 30_000
    long = lookup(client, "ahead-long")
    assert long is not None, "a year-long delay from a clock ahead of ours is stored"
    assert long["due_ms"] < sent_ms + 364 * DAY_MS + SKEW_MS + 30_000

    for reason, n in Counter(expected.values()).items():
        metric_reaches(client, "delaybridge_dead_lettered_total", n, 20, reason=reason)
    # Every worker process reads the whole cancel topic: each counts the garbage once.
    unreadable = metric_by_worker(client, "delaybridge_cancels_unreadable_total")
    assert unreadable and set(unreadable.values()) == {len(garbage)}, unreadable
    assert metric(client, "delaybridge_cancelled_total") == 1
    assert metric(client, "delaybridge_early_deliveries_total") == 0
    ends = high_watermarks(bootstrap, delay, PARTITIONS)
    wait_until(
        lambda: committed(bootstrap, settings.kafka.group_id, delay, PARTITIONS) == ends,
        30,
        f"the group committed every delay-topic partition to its end {ends}",
    )
    assert client("GET", "/healthz").status == 200
    log = this_run(side)
    assert "Traceback" not in log and "internal-error" not in log, log[-3000:]
    assert side.terminate(30) == 0
    watcher.close()


@pytest.mark.parametrize(
    ("policy", "reason"),
    [
        ("dead-letter", "clock-skew"),
        # Trusted, the stamp makes the delay legal (364 days from it) while the store
        # refuses it (394 days from our clock): the path that crashed the sidecar.
        ("trust", "delay-too-long"),
    ],
)
def test_a_producer_clock_30_days_ahead_under_each_timestamp_policy(
    kafka: Any,
    topics: Topics,
    tmp_path: Path,
    make_settings: Callable[..., Settings],
    policy: str,
    reason: str,
) -> None:
    bootstrap = kafka.bootstrap_servers
    orders = topics.targets[0]
    side = SubprocessSidecar(make_settings(timestamp_policy=policy), tmp_path)
    side.start()
    side.wait_log("assigned", 60)
    watcher = Watcher(bootstrap, [orders, topics.dead_letter])
    producer = Producer({"bootstrap.servers": bootstrap})
    to = ("delay-target-topic", orders)
    producer.produce(
        topics.delay,
        b"ahead",
        partition=0,
        timestamp=now_ms() + 30 * DAY_MS,
        headers=[to, ("delay-sec", str(364 * 86_400)), ("delay-id", "ahead")],
    )
    producer.produce(
        topics.delay, b"next", partition=0, headers=[to, ("delay-ms", "1"), ("delay-id", "next")]
    )
    assert producer.flush(30) == 0

    def out(_: object) -> bool:
        alive(side)
        return "next" in watcher.ids(orders) and bool(watcher.ids(topics.dead_letter))

    watcher.until(out, 60, "the record behind it delivered, the skewed one dead-lettered")
    (dead,) = [a for a in watcher.arrivals if a.topic == topics.dead_letter]
    assert (dead.value, dead.headers["delay-error"]) == (b"ahead", reason)
    assert side.terminate(30) == 0
    watcher.close()
