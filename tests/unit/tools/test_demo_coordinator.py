"""The demo waits out a fresh broker's group-coordinator load before its clients join,
so librdkafka never logs "Coordinator load in progress" at them (issue 15)."""

from __future__ import annotations

from concurrent.futures import Future

import pytest
from confluent_kafka import KafkaError, KafkaException

from delaybridge.errors import DelayBridgeError
from delaybridge.tools.demo import _await_group_coordinator


class CoordinatorLoading:
    """An admin client whose group coordinator answers after ``loading`` refusals."""

    def __init__(self, *errors: int) -> None:
        self.errors = list(errors)
        self.calls = 0

    def describe_consumer_groups(self, groups: list[str]) -> dict[str, Future[object]]:
        self.calls += 1
        future: Future[object] = Future()
        if self.errors:
            future.set_exception(KafkaException(KafkaError(self.errors.pop(0))))
        else:
            future.set_result(object())
        return {groups[0]: future}


def test_waits_while_the_coordinator_loads() -> None:
    admin = CoordinatorLoading(
        KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.COORDINATOR_LOAD_IN_PROGRESS
    )
    _await_group_coordinator(admin, 10)  # type: ignore[arg-type]
    assert admin.calls == 3


def test_other_errors_are_not_waited_out() -> None:
    admin = CoordinatorLoading(KafkaError.GROUP_AUTHORIZATION_FAILED)
    with pytest.raises(KafkaException):
        _await_group_coordinator(admin, 10)  # type: ignore[arg-type]
    assert admin.calls == 1


def test_gives_up_after_the_timeout_naming_the_cause() -> None:
    admin = CoordinatorLoading(*[KafkaError.COORDINATOR_LOAD_IN_PROGRESS] * 1000)
    with pytest.raises(DelayBridgeError, match=r"group coordinator did not come up in 0\.3 s"):
        _await_group_coordinator(admin, 0.3)  # type: ignore[arg-type]
