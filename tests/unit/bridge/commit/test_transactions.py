"""The transactional producer's identity and its error classes (bridge/commit/transactions.py)."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import KafkaError, KafkaException

from delaybridge.bridge.commit.transactions import ID_FILE, Transactions, transactional_id
from delaybridge.bridge.observe.tally import Tally


def test_explicit_then_static_member_then_kept_in_the_data_dir(tmp_path: Path) -> None:
    assert transactional_id("mine", "g", "pod-0", tmp_path) == "mine"
    assert transactional_id("", "g", "pod-0", tmp_path) == "g-pod-0"
    first = transactional_id("", "g", "", tmp_path / "data")
    assert first.startswith("g-") and (tmp_path / "data" / ID_FILE).read_text() == first
    assert transactional_id("", "g", "", tmp_path / "data") == first  # the restart
    assert transactional_id("", "g", "", tmp_path / "other") != first  # another replica


class _SlowAbort:
    """abort_transaction blocks for its timeout and then asks to be called again, as
    librdkafka does while records to a topic that refuses them are still timing out."""

    def __init__(self, timeouts: int) -> None:
        self.timeouts = timeouts
        self.calls = 0
        self.inits = 0

    def init_transactions(self, timeout: float = -1) -> None:
        self.inits += 1

    def abort_transaction(self, timeout: float = -1) -> None:
        self.calls += 1
        if self.calls <= self.timeouts:
            time.sleep(timeout * 0.6)
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "retry", retriable=True))


def test_an_abort_that_times_out_is_called_again_not_fatal() -> None:
    producer = _SlowAbort(timeouts=2)
    tally = Tally()
    txns = Transactions(producer, timeout_ms=1_000, tally=tally)  # type: ignore[arg-type]
    txns.open = True
    txns.abort("a record failed")
    assert producer.calls == 3 and txns.fatal is None and not txns.open
    assert tally.transactions_aborted == 1 and txns.consecutive_aborts == 1


def test_an_abort_that_never_finishes_replaces_the_producer() -> None:
    stuck, fresh = _SlowAbort(timeouts=1_000), _SlowAbort(timeouts=0)
    txns = Transactions(stuck, 1_000, Tally(), renew=lambda: fresh)  # type: ignore[arg-type,return-value]
    txns.open = True
    txns.abort("a record timed out")
    # Two transaction timeouts of trying, then a new producer with the same id, whose
    # init_transactions fences the stuck one and aborts its transaction.
    assert stuck.calls >= 2 and fresh.inits == 1
    assert txns.fatal is None and not txns.open and txns.epoch == 1
