"""The one produce-with-retry: until acknowledged, with backoff, while wanted."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError, Message

from delaybridge.bridge.produce.outbox import Outbox
from delaybridge.bridge.produce.resend import Lane, Resender, Write
from delaybridge.bridge.produce.retry_queue import BACKOFF_MIN_MS, RetryQueue
from delaybridge.timerlog import ManualClock
from tests.fakes.clients import FakeProducer
from tests.fakes.cluster import FakeCluster

T = 1_000_000


def _parts() -> tuple[FakeCluster, FakeProducer, RetryQueue, ManualClock, Resender]:
    cluster = FakeCluster()
    cluster.create_topic("out")
    producer = FakeProducer(cluster)
    retries = RetryQueue()
    clock = ManualClock(T)
    return cluster, producer, retries, clock, Resender(Outbox(producer), retries, clock)


Send = Callable[[Resender, Callable[[Message | None], None], Callable[[], bool]], None]


def _as_write(
    resender: Resender, on_ack: Callable[[Message | None], None], wanted: Callable[[], bool]
) -> None:
    resender.send(Write("test record", "out", b"v", b"k", None, on_ack, wanted=wanted))


def _in_lane(
    resender: Resender, on_ack: Callable[[Message | None], None], wanted: Callable[[], bool]
) -> None:
    # The changelog's way: a Write is built only once the first try failed, and the
    # lane's on_ack gets the record's key and extra.
    def lane_ack(key: bytes | None, extra: object, msg: Message | None) -> None:
        assert (key, extra) == (b"k", "extra")
        on_ack(msg)

    lane = Lane("test record", "out", None, wanted, lane_ack)
    resender.send_in(lane, b"v", b"k", None, "extra")


BOTH = pytest.mark.parametrize("send", [_as_write, _in_lane], ids=["write", "lane"])


@BOTH
def test_a_failed_write_is_sent_again_after_a_backoff_until_acknowledged(send: Send) -> None:
    cluster, producer, retries, clock, resender = _parts()
    acked: list[Message | None] = []
    producer.fail_next("out", KafkaError.REQUEST_TIMED_OUT, times=2)
    send(resender, acked.append, lambda: True)
    producer.poll(0)  # first report: failed
    assert not acked
    assert retries.next_ms() == T + BACKOFF_MIN_MS
    clock.advance(BACKOFF_MIN_MS)
    retries.run_due(clock.now_ms())
    producer.poll(0)  # second: failed again, a longer backoff
    assert retries.next_ms() == clock.now_ms() + 2 * BACKOFF_MIN_MS
    clock.advance(2 * BACKOFF_MIN_MS)
    retries.run_due(clock.now_ms())
    producer.poll(0)
    assert len(acked) == 1 and [r.value() for r in cluster.records("out")] == [b"v"]


@BOTH
def test_a_write_no_longer_wanted_is_given_up(send: Send) -> None:
    cluster, producer, retries, clock, resender = _parts()
    ours = [True]
    producer.fail_next("out", KafkaError.REQUEST_TIMED_OUT)
    send(resender, lambda _m: None, lambda: ours[0])
    producer.poll(0)
    ours[0] = False  # its partition moved away meanwhile
    clock.advance(60_000)
    retries.run_due(clock.now_ms())
    producer.poll(0)
    assert cluster.records("out") == [] and len(retries) == 0


def test_on_failure_may_deal_with_a_refusal_itself() -> None:
    _cluster, producer, retries, _clock, resender = _parts()
    refused: list[int] = []

    def shrink(w: Write, err: KafkaError) -> bool:
        refused.append(err.code())
        return True  # dealt with: no retry

    producer.fail_next("out", KafkaError.MSG_SIZE_TOO_LARGE)
    resender.send(Write("big", "out", b"v" * 10, None, None, lambda _m: None, on_failure=shrink))
    producer.poll(0)
    assert refused == [KafkaError.MSG_SIZE_TOO_LARGE] and len(retries) == 0


@BOTH
def test_a_full_queue_is_tried_again_later_not_dropped(send: Send) -> None:
    cluster, producer, retries, clock, resender = _parts()
    producer.queue_capacity = 0
    acked: list[Message | None] = []
    send(resender, acked.append, lambda: True)
    assert len(retries) == 1
    producer.queue_capacity = 10
    clock.advance(BACKOFF_MIN_MS)
    retries.run_due(clock.now_ms())
    producer.poll(0)
    assert len(acked) == 1 and len(cluster.records("out")) == 1
