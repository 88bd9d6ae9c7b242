"""DelayClient on the in-memory fake: every header each call writes, its acknowledgement,
and every argument it refuses (the error names the argument)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from confluent_kafka import KafkaError, Message

from delaybridge.client import ClientArgumentError, DelayClient
from delaybridge.connectors import ProduceError
from tests.fakes.clients import FakeProducer
from tests.fakes.cluster import FakeCluster
from tests.unit.client.conftest import DELAY, NOW_S


def only(cluster: FakeCluster, topic: str = DELAY) -> Message:
    (msg,) = cluster.records(topic)
    return msg


def test_schedule_with_a_delay_writes_target_delay_id_and_the_callers_headers(
    client: DelayClient, cluster: FakeCluster
) -> None:
    ref = client.schedule(
        "orders",
        b"close 42",
        key="order-42",
        headers=[("trace", "abc"), ("raw", b"\x00")],
        delay=timedelta(minutes=30),
        id="order-42",
    )

    msg = only(cluster)
    assert (ref.topic, ref.partition, ref.offset) == (
        DELAY,
        msg.partition(),
        0,
    )  # acknowledged: it is in the log
    assert (msg.key(), msg.value()) == (b"order-42", b"close 42")
    assert msg.headers() == [
        ("delay-target-topic", b"orders"),
        ("delay-ms", b"1800000"),
        ("delay-id", b"order-42"),
        ("trace", b"abc"),
        ("raw", b"\x00"),
    ]


def test_schedule_with_a_jitter_writes_delay_jitter(
    client: DelayClient, cluster: FakeCluster
) -> None:
    client.schedule("orders", b"v", delay=timedelta(seconds=1), jitter=timedelta(seconds=10))

    assert only(cluster).headers() == [
        ("delay-target-topic", b"orders"),
        ("delay-ms", b"1000"),
        ("delay-jitter", b"10000"),
    ]


def test_schedule_at_an_instant_rounds_up_to_the_millisecond(
    client: DelayClient, cluster: FakeCluster
) -> None:
    at = datetime(2026, 1, 2, 9, 0, 0, 1, tzinfo=ZoneInfo("Europe/Paris"))  # 1 µs past

    client.schedule("orders", None, at=at, partition=1, headers={"h": None})

    assert only(cluster).headers() == [
        ("delay-target-topic", b"orders"),
        ("delay-target-partition", b"1"),
        ("deliver-at-ms", str(int(at.timestamp()) * 1000 + 1).encode()),
        ("h", None),
    ]


def test_a_daily_cron_in_a_time_zone_with_an_end(client: DelayClient, cluster: FakeCluster) -> None:
    until = datetime(2026, 3, 1, 8, 0, 0, 999, tzinfo=UTC)  # rounded down: never after it

    client.schedule(
        "reminders", "stand-up", cron="0 9 * * 1-5", tz="Europe/Paris", until=until, id="r"
    )

    assert only(cluster).headers() == [
        ("delay-target-topic", b"reminders"),
        ("delay-cron", b"0 9 * * 1-5"),
        ("delay-timezone", b"Europe/Paris"),
        ("delay-until", str(int(until.timestamp()) * 1000).encode()),
        ("delay-id", b"r"),
    ]


def test_every_with_a_first_occurrence_a_count_and_keep(
    client: DelayClient, cluster: FakeCluster
) -> None:
    client.schedule(
        "orders",
        b"v",
        delay=timedelta(seconds=5),
        every=timedelta(minutes=90),
        count=3,
        id="poll",
        on_duplicate="keep",
    )

    assert only(cluster).headers() == [
        ("delay-target-topic", b"orders"),
        ("delay-ms", b"5000"),
        ("delay-every", b"5400000"),
        ("delay-count", b"3"),
        ("delay-id", b"poll"),
        ("delay-on-duplicate", b"keep"),
    ]


def test_reschedule_is_a_replacing_schedule_with_the_same_id(
    client: DelayClient, cluster: FakeCluster
) -> None:
    client.reschedule("order-42", "orders", b"close 42", key=b"k", delay=timedelta(seconds=1))

    msg = only(cluster)
    assert (msg.key(), msg.value()) == (b"k", b"close 42")
    assert msg.headers() == [
        ("delay-target-topic", b"orders"),
        ("delay-ms", b"1000"),
        ("delay-id", b"order-42"),
        ("delay-on-duplicate", b"replace"),
    ]


def test_cancel_prefix_writes_the_header_keyed_by_the_prefix(
    client: DelayClient, cluster: FakeCluster
) -> None:
    client.cancel_prefix("tenant-9/", target="orders")
    (msg,) = cluster.records(DELAY)
    assert (msg.key(), msg.value()) == (b"tenant-9/", b"")
    assert msg.headers() == [
        ("delay-cancel-prefix", b"tenant-9/"),
        ("delay-target-topic", b"orders"),
    ]


def test_cancel_is_keyed_by_the_id_with_an_empty_value(
    client: DelayClient, cluster: FakeCluster
) -> None:
    client.cancel("order-42")
    client.cancel("order-43", target="orders")

    first, second = sorted(cluster.records(DELAY), key=lambda m: m.key() or b"")
    assert (first.key(), first.value(), first.headers()) == (
        b"order-42",
        b"",
        [("delay-cancel", b"order-42")],
    )
    assert second.headers() == [("delay-cancel", b"order-43"), ("delay-target-topic", b"orders")]


def test_a_failed_delivery_report_raises_with_librdkafkas_code(
    client: DelayClient, producer: FakeProducer, cluster: FakeCluster
) -> None:
    producer.fail_next(DELAY, KafkaError._MSG_TIMED_OUT)

    with pytest.raises(ProduceError, match="_MSG_TIMED_OUT"):
        client.cancel("x")
    assert cluster.records(DELAY) == []


def test_no_acknowledgement_within_the_timeout_raises(cluster: FakeCluster) -> None:
    producer = FakeProducer(cluster, hold_acks=True)
    client = DelayClient(producer, DELAY, timeout=timedelta(milliseconds=50))

    with pytest.raises(ProduceError, match="no acknowledgement"):
        client.cancel("x")


def test_connect_builds_an_idempotent_producer_that_gives_up_when_the_client_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built: list[dict[str, Any]] = []

    class Captured(FakeProducer):
        flushed = 0

        def flush(self, timeout: float = -1) -> int:
            Captured.flushed += 1
            return 0

    def producer(conf: dict[str, Any], logger: Any = None) -> FakeProducer:
        built.append(conf)
        return Captured(FakeCluster())

    monkeypatch.setattr("delaybridge.connectors.clients.Producer", producer)
    with DelayClient.connect("broker:9092", DELAY, timeout=timedelta(seconds=7)) as client:
        assert client.delay_topic == DELAY
    (conf,) = built
    assert conf["bootstrap.servers"] == "broker:9092"
    assert (conf["enable.idempotence"], conf["acks"]) == (True, "all")
    assert conf["message.timeout.ms"] == 7_000
    assert Captured.flushed == 1  # close() flushes the producer it built


WHEN: dict[str, Any] = {"delay": timedelta(seconds=1)}
PARIS = datetime(2026, 1, 1, tzinfo=ZoneInfo("Europe/Paris"))


@pytest.mark.parametrize(
    ("kwargs", "argument", "says"),
    [
        ({"target": "no spaces", **WHEN}, "target", "not a legal Kafka topic name"),
        ({"target": "", **WHEN}, "target", "not a legal Kafka topic name"),
        ({"target": DELAY, **WHEN}, "target", "target-is-delay-topic"),
        ({"target": "__consumer_offsets", **WHEN}, "target", "internal topic"),
        ({"value": 42, **WHEN}, "value", "expected bytes, str or None"),
        ({"key": 1.5, **WHEN}, "key", "expected bytes, str or None"),
        ({}, "delay/at/cron/every", "give one"),
        ({"delay": timedelta(1), "at": PARIS}, "delay/at", "not both"),
        ({"cron": "@daily", "every": timedelta(hours=1)}, "cron/every", "not both"),
        ({"delay": 5}, "delay", "expected a datetime.timedelta, got int"),
        ({"delay": timedelta(seconds=-1)}, "delay", "shorter than 0 ms"),
        ({"delay": timedelta(days=366)}, "delay", "delay-too-long"),
        ({"at": datetime(2026, 1, 2)}, "at", "has no time zone"),
        ({"at": "2026-01-02T00:00:00Z"}, "at", "expected a datetime.datetime, got str"),
        ({"cron": "61 * * * *"}, "cron", "bad-recurrence"),
        ({"cron": ""}, "cron", "expected a cron expression"),
        ({"cron": "@daily", "tz": "Mars/Olympus"}, "tz", "not a known IANA time zone"),
        ({"every": timedelta(hours=1), "tz": "UTC"}, "tz", "applies to cron only"),
        ({"delay": timedelta(1), "tz": "UTC"}, "tz", "applies to cron only"),
        ({"every": timedelta(milliseconds=999)}, "every", "shorter than 1000 ms"),
        ({"every": timedelta(microseconds=1_000_500)}, "every", "not whole milliseconds"),
        ({"delay": timedelta(1), "until": PARIS}, "until", "give cron or every"),
        ({"delay": timedelta(1), "count": 2}, "count", "give cron or every"),
        ({"every": timedelta(hours=1), "count": 0}, "count", "expected an int in 1.."),
        ({"every": timedelta(hours=1), "count": True}, "count", "expected an int in 1.."),
        ({"every": timedelta(hours=1), "until": PARIS}, "until", "before the first occurrence"),
        ({"id": "", **WHEN}, "id", "must not be empty"),
        ({"id": 7, **WHEN}, "id", "expected a str"),
        ({"id": "x" * 65_536, **WHEN}, "id", "65536 bytes"),
        ({"on_duplicate": "keep", **WHEN}, "on_duplicate", "needs an id"),
        ({"id": "i", "on_duplicate": "merge", **WHEN}, "on_duplicate", "'replace' or 'keep'"),
        ({"partition": -1, **WHEN}, "partition", "expected an int in 0.."),
        ({"headers": [("delay-ms", "5")], **WHEN}, "headers", "'delay-ms' belongs"),
        ({"headers": {"delay-cancel": "x"}, **WHEN}, "headers", "'delay-cancel' belongs"),
        ({"headers": [("delaybridge-series", b"{}")], **WHEN}, "headers", "belongs"),
        ({"headers": [("a", 1)], **WHEN}, "headers", "header 'a': expected str, bytes"),
        ({"headers": ["a"], **WHEN}, "headers", "expected (name, value) pairs"),
        ({"every": timedelta(hours=1), "jitter": timedelta(1)}, "jitter", "not a series"),
        ({"jitter": timedelta(seconds=-1), **WHEN}, "jitter", "shorter than 0 ms"),
        ({"jitter": timedelta(days=2), **WHEN}, "jitter", "more than the maximum"),
    ],
)
def test_schedule_refuses_a_wrong_argument_and_names_it(
    client: DelayClient,
    cluster: FakeCluster,
    kwargs: dict[str, Any],
    argument: str,
    says: str,
) -> None:
    target = kwargs.pop("target", "orders")
    value = kwargs.pop("value", b"v")

    with pytest.raises(ClientArgumentError) as caught:
        client.schedule(target, value, **kwargs)

    assert caught.value.argument == argument
    assert str(caught.value).startswith(f"{argument}: ")
    assert says in str(caught.value)
    assert cluster.records(DELAY) == []  # nothing sent


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda c: c.cancel(""), "id"),
        (lambda c: c.cancel("x", target="a b"), "target"),
        (lambda c: c.cancel_prefix(""), "prefix"),
        (lambda c: c.cancel_prefix("  "), "prefix"),
        (lambda c: c.cancel_prefix("x", target="a b"), "target"),
        (lambda c: c.reschedule("i", "orders", b"v"), "delay/at/cron/every"),
        (lambda c: c.reschedule("", "orders", b"v", delay=timedelta(1)), "id"),
    ],
)
def test_cancel_and_reschedule_refuse_a_wrong_argument_and_name_it(
    client: DelayClient, call: Any, argument: str
) -> None:
    with pytest.raises(ClientArgumentError) as caught:
        call(client)
    assert caught.value.argument == argument


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"delay_topic": "a b"}, "delay_topic"),
        ({"timeout": timedelta(0)}, "timeout"),
        ({"max_delay": 5}, "max_delay"),
    ],
)
def test_the_constructor_refuses_a_wrong_argument_and_names_it(
    producer: FakeProducer, kwargs: dict[str, Any], argument: str
) -> None:
    args: dict[str, Any] = {"delay_topic": DELAY, **kwargs}
    with pytest.raises(ClientArgumentError) as caught:
        DelayClient(producer, args.pop("delay_topic"), **args)
    assert caught.value.argument == argument


def test_max_delay_is_the_sidecars_limit(producer: FakeProducer) -> None:
    client = DelayClient(producer, DELAY, max_delay=timedelta(hours=1), clock=lambda: NOW_S)
    client.schedule("orders", b"v", delay=timedelta(hours=1))

    with pytest.raises(ClientArgumentError, match=r"delay: .*delay-too-long"):
        client.schedule("orders", b"v", delay=timedelta(hours=1, milliseconds=1))
