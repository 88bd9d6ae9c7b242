"""EndOffsets: one request at a time, given up when unanswered, a stale epoch refreshed."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from delaybridge.connectors.end_offsets import EndOffsets


class Admin:
    """An admin client whose requests wait until the test answers them."""

    def __init__(self) -> None:
        self.requests: list[dict[TopicPartition, Future[Any]]] = []
        self.kwargs: list[dict[str, Any]] = []
        self.refreshed: list[str | None] = []

    def list_offsets(
        self, wanted: dict[TopicPartition, Any], **kwargs: Any
    ) -> dict[TopicPartition, Future[Any]]:
        futures: dict[TopicPartition, Future[Any]] = {tp: Future() for tp in wanted}
        self.requests.append(futures)
        self.kwargs.append(kwargs)
        return futures

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        self.refreshed.append(topic)
        return SimpleNamespace(topics={})

    def answer(self, offsets: dict[tuple[str, int], int]) -> None:
        """Answer the last request: an offset, or minus an error code."""
        for tp, future in self.requests[-1].items():
            found = offsets[(tp.topic, tp.partition)]
            if found < 0:
                future.set_exception(KafkaException(KafkaError(-found)))
            else:
                future.set_result(SimpleNamespace(offset=found))


def ends(admin: Admin, timeout_ms: int = 5_000) -> EndOffsets:
    return EndOffsets(admin, "test", read_committed=True, timeout_ms=timeout_ms)  # type: ignore[arg-type]


def test_one_request_at_a_time_and_its_answer_once() -> None:
    admin = Admin()
    offsets = ends(admin)
    assert offsets.ask([("t", 0), ("t", 1)], now_ms=0)
    assert not offsets.ask([("t", 0)], now_ms=100)  # one in flight
    assert offsets.take() is None
    admin.answer({("t", 0): 5, ("t", 1): 7})
    assert offsets.take() == {("t", 0): 5, ("t", 1): 7}
    assert offsets.take() is None  # handed out once
    assert len(admin.requests) == 1
    assert str(admin.kwargs[0]["isolation_level"]).endswith("READ_COMMITTED")


def test_an_unanswered_request_is_given_up_after_the_timeout() -> None:
    admin = Admin()
    offsets = ends(admin, timeout_ms=5_000)
    assert offsets.ask([("t", 0)], now_ms=0)
    assert not offsets.ask([("t", 0)], now_ms=4_999)
    assert offsets.ask([("t", 0)], now_ms=5_000)  # the first is lost with its connection
    admin.answer({("t", 0): 3})
    assert offsets.take() == {("t", 0): 3}


def test_a_failed_partition_is_left_out_and_a_stale_epoch_refreshes_the_metadata() -> None:
    admin = Admin()
    offsets = ends(admin)
    assert offsets.ask([("t", 0), ("t", 1), ("u", 0)], now_ms=0)
    admin.answer(
        {
            ("t", 0): 4,
            ("t", 1): -KafkaError.FENCED_LEADER_EPOCH,
            ("u", 0): -KafkaError.REQUEST_TIMED_OUT,
        }
    )
    assert offsets.take() == {("t", 0): 4}
    assert admin.refreshed == ["t"]  # only the topic whose leader epoch moved


def test_nothing_to_ask_is_not_a_request() -> None:
    admin = Admin()
    assert not ends(admin).ask([], now_ms=0)
    assert admin.requests == []
