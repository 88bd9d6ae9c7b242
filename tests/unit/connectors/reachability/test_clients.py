"""ReportingClients: every client reports to the one tracker; idle ones are served."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError, Message, TopicPartition

from delaybridge.connectors.reachability import KafkaReachability, ReportingClients
from delaybridge.connectors.reachability.tracker import ClientLog
from tests.fakes import FakeClients, FakeCluster, FakeListenerProbe


def reporting() -> tuple[ReportingClients, FakeClients, KafkaReachability]:
    fakes = FakeClients(FakeCluster())
    tracker = KafkaReachability(FakeListenerProbe(), on_fatal=lambda err: None)
    return ReportingClients(fakes, tracker), fakes, tracker


def test_every_kind_of_client_gets_the_trackers_callbacks() -> None:
    clients, fakes, tracker = reporting()
    clients.producer({"linger.ms": 5})
    clients.consumer({"group.id": "g"})
    clients.consumer({"group.id": "g.restore"}, group=False)
    clients.admin()
    configs = [
        *(c.config for c in fakes.producers),
        *(c.config for c in fakes.consumers),
        *(c.config for c in fakes.admins),
    ]
    assert len(configs) == 4
    for config in configs:
        assert config["error_cb"] == tracker.client_error
        assert isinstance(config["logger"], ClientLog)
    assert fakes.producers[0].config["linger.ms"] == 5


def test_a_clients_own_error_callback_gets_its_fatal_errors_the_tracker_the_rest() -> None:
    clients, fakes, tracker = reporting()
    own: list[KafkaError] = []
    clients.consumer({"group.id": "g", "error_cb": own.append})
    error_cb = fakes.consumers[0].config["error_cb"]
    fatal = KafkaError(KafkaError._FATAL, "fenced", fatal=True)
    error_cb(fatal)
    error_cb(KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))
    assert own == [fatal]
    assert tracker.state.value == "checking"  # the other error reached the tracker


def test_a_caller_cannot_set_the_log_sink_the_tracker_owns() -> None:
    clients, _, _ = reporting()
    with pytest.raises(ValueError, match="logger: set by ReportingClients"):
        clients.admin({"logger": logging.getLogger("x")})


class Reader:
    """A reader that records how it is served."""

    def __init__(self, assigned: list[TopicPartition], returns: list[Message]) -> None:
        self.assigned = assigned
        self.returns = returns
        self.consumed = 0

    def assignment(self) -> list[TopicPartition]:
        return self.assigned

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]:
        self.consumed += 1
        returned, self.returns = self.returns, []
        return returned


def test_the_admin_client_and_idle_readers_are_served() -> None:
    clients, fakes, tracker = reporting()
    admin = clients.admin()
    idle = Reader(
        [], [Message(error=KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))]
    )
    busy = Reader([TopicPartition("changelog", 0)], [])
    clients._serve_idle(idle)  # type: ignore[arg-type]
    clients._serve_idle(busy)  # type: ignore[arg-type]
    assert idle.consumed == 1 and busy.consumed == 0  # the busy one's owner consumes it
    assert tracker.state.value == "checking"  # the error event went to the tracker
    tracker.tick()
    assert fakes.admins[0] is admin and fakes.admins[0].polls == 1


def test_readers_built_through_it_are_served_group_members_are_not() -> None:
    clients, fakes, tracker = reporting()
    clients.consumer({"group.id": "g"})
    clients.consumer({"group.id": "g.standby"}, group=False)
    served: list[str] = []

    def recording(name: str) -> Callable[..., list[Message]]:
        def consume(num_messages: int = 1, timeout: float = -1) -> list[Message]:
            served.append(name)
            return []

        return consume

    group, reader = fakes.consumers
    group.consume = recording("group")  # type: ignore[method-assign]
    reader.consume = recording("reader")  # type: ignore[method-assign]
    tracker.tick()
    assert served == ["reader"]
