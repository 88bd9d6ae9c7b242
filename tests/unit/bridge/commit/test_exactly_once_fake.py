"""Exactly-once mode on the fakes (issue 12): transactions, aborts, crashes, fencing.

The fake producer follows Kafka's transaction rules (``tests/fakes/transactions.py``);
``cluster.records`` is what a read_committed consumer reads, so "delivered once" below
means once for such a consumer.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError

from delaybridge.errors import ConfigError
from delaybridge.settings import load
from tests.fakes.transactions import TransactionalProducer
from tests.unit.bridge.sidecar_kit import DELAY, DLT, ORDERS, FakeSidecar, schedule

EOS: dict[str, Any] = {"exactly_once": True}


def eos_sidecar(data_dir: Path, **kw: Any) -> FakeSidecar:
    delivery = {**EOS, **kw.pop("delivery", {})}
    return FakeSidecar(data_dir, delivery=delivery, **kw)


def txn_producer(side: FakeSidecar) -> TransactionalProducer:
    producer = side.producer
    assert isinstance(producer, TransactionalProducer)
    return producer


def ids(side: FakeSidecar, topic: str = ORDERS) -> Counter[str]:
    return Counter(h["delay-id"] for h in side.delivered(topic))


def kill(side: FakeSidecar) -> None:
    """kill -9: no flush, no commit, no leave; the transaction stays open."""
    for part in side.service.partitions:
        part.store.abandon()
    for consumer in side.clients.consumers:
        consumer.crash()


def test_exactly_once_needs_the_changelog() -> None:
    with pytest.raises(ConfigError, match=r"changelog\.enabled"):
        load(None, delivery=EOS, changelog={"enabled": False})


def test_deliveries_and_offsets_become_visible_together_at_the_commit(tmp_path: Path) -> None:
    side = eos_sidecar(tmp_path)
    side.send(schedule("now0", 0))
    side.send(schedule("later0", 600_000))
    side.turns(3, advance_ms=200)
    assert txn_producer(side).txn is not None  # delivered inside the open transaction
    assert ids(side) == Counter() and side.committed(0) is None
    side.checkpoint()
    assert ids(side) == Counter({"now0": 1})
    assert side.committed(0) == 2  # both records handled: the offsets went with it
    side.stop()


def test_an_aborted_transaction_is_redelivered_once(tmp_path: Path) -> None:
    side = eos_sidecar(tmp_path)
    for i in range(5):
        side.send(schedule(f"now{i}", 0))
    side.turns(3, advance_ms=200)
    txn_producer(side).fail_commit_next(abortable=True)
    side.checkpoint()  # aborted: the partitions restart from the last commit
    assert txn_producer(side).aborts == 1 and ids(side) == Counter()
    side.turns(3, advance_ms=200)
    side.checkpoint()
    assert ids(side) == Counter({f"now{i}": 1 for i in range(5)})
    assert side.committed(0) == 5
    side.stop()


def test_a_retriable_commit_error_is_retried(tmp_path: Path) -> None:
    side = eos_sidecar(tmp_path)
    side.send(schedule("now0", 0))
    side.turns(3, advance_ms=200)
    txn_producer(side).fail_commit_next(KafkaError._TIMED_OUT, retriable=True, times=2)
    side.checkpoint()
    assert txn_producer(side).aborts == 0 and ids(side) == Counter({"now0": 1})
    side.stop()


def test_kill_9_between_commits_neither_loses_nor_repeats(tmp_path: Path) -> None:
    a = eos_sidecar(tmp_path / "a")
    for i in range(4):
        a.send(schedule(f"first{i}", 0))
    a.send(schedule("due-later", 1_000))
    a.turns(3, advance_ms=200)
    a.checkpoint()  # first0..3 committed; due-later stored and in the changelog
    for i in range(3):
        a.send(schedule(f"second{i}", 0))
    a.turns(3, advance_ms=600)
    a.turns(3, advance_ms=600)  # everything delivered, in a transaction never committed
    kill(a)
    assert ids(a) == Counter({f"first{i}": 1 for i in range(4)})
    b = eos_sidecar(tmp_path / "a", clock=a.clock, cluster=a.cluster)  # same disk and id
    assert txn_producer(a).fenced  # its zombie can never commit now
    b.turns(4, advance_ms=600)
    b.checkpoint()
    expected = {f"first{i}": 1 for i in range(4)} | {f"second{i}": 1 for i in range(3)}
    assert ids(b) == Counter(expected | {"due-later": 1})
    b.stop()


def test_a_lost_disk_restores_from_the_committed_changelog_only(tmp_path: Path) -> None:
    a = eos_sidecar(tmp_path / "a")
    a.send(schedule("kept", 600_000))
    a.turns(2)
    a.checkpoint()
    a.send(schedule("uncommitted", 600_000))
    a.turns(2)
    a.service.changelog.write_all(list(a.service.partitions))  # type: ignore[union-attr]
    a.service.outbox.flush(1)  # its value is in the log, in the open transaction
    kill(a)
    b = eos_sidecar(tmp_path / "b", clock=a.clock, cluster=a.cluster)  # a new disk
    b.turns(3)
    assert b.service.partitions.by_key[(DELAY, 0)].role.value == "restoring"  # held by a's
    txn = txn_producer(a).txn  # open transaction, until the broker times it out:
    assert txn is not None
    txn.status = "aborted"
    b.turns(6)
    part = b.service.partitions.by_key[(DELAY, 0)]
    assert part.store.lookup("kept") is not None
    # Its value was never committed, so the restore skipped it; its offset was not
    # committed either, so it is read again from the delay topic and stored once.
    assert part.store.stats().pending == 2
    b.stop()


def test_a_missing_target_is_judged_without_aborting(tmp_path: Path) -> None:
    side = eos_sidecar(tmp_path, delivery={"missing_topic_retry_ms": 0})
    side.send(schedule("lost", 0, target="no-such-topic"))
    side.send(schedule("fine", 0))
    side.turns(3, advance_ms=200)
    side.checkpoint()
    assert txn_producer(side).aborts == 0
    assert ids(side) == Counter({"fine": 1})
    assert [h["delay-error"] for h in side.delivered(DLT)] == ["target-topic-missing"]
    side.stop()


def test_a_record_that_failed_is_not_produced_into_the_next_transaction(tmp_path: Path) -> None:
    side = eos_sidecar(tmp_path)
    side.send(schedule("huge", 0))
    side.send(schedule("fine", 0))
    txn_producer(side).fail_next(ORDERS, KafkaError.MSG_SIZE_TOO_LARGE)
    side.turns(3, advance_ms=200)
    side.checkpoint()  # doomed by the failed record: aborted
    assert txn_producer(side).aborts == 1
    side.turns(3, advance_ms=200)
    side.checkpoint()  # "huge" goes to the dead-letter topic without a second try
    assert txn_producer(side).aborts == 1
    assert ids(side) == Counter({"fine": 1})
    assert [h["delay-id"] for h in side.delivered(DLT)] == ["huge"]
    side.stop()


def test_a_fenced_producer_stops_the_sidecar(tmp_path: Path) -> None:
    side = eos_sidecar(tmp_path)
    side.send(schedule("now0", 0))
    side.turns(3, advance_ms=200)
    usurper = TransactionalProducer(side.cluster, dict(txn_producer(side).config))
    usurper.init_transactions()
    side.checkpoint()
    assert side.service.control.failure is not None and "fenced" in side.service.control.failure
    assert ids(side) == Counter()
    side.stop()  # the shutdown that follows completes: no commit, every store closed
    assert len(side.service.partitions) == 0 and ids(side) == Counter()


def test_a_rebalance_commits_before_the_handover(tmp_path: Path) -> None:
    a = eos_sidecar(tmp_path / "a")
    for i in range(6):
        a.send(schedule(f"p0-{i}", 500), partition=0)
        a.send(schedule(f"p1-{i}", 500), partition=1)
    a.turns(3, advance_ms=200)
    b = eos_sidecar(tmp_path / "b", clock=a.clock, cluster=a.cluster)  # takes a partition
    a.turns(2)  # a: revoke -> commit -> close
    for _ in range(6):
        b.turns(1, advance_ms=200)
        a.turns(1)
        a.checkpoint()
        b.checkpoint()
    expected = {f"p{p}-{i}": 1 for p in (0, 1) for i in range(6)}
    assert ids(a) == Counter(expected)
    a.stop()
    b.stop()


def test_lost_partitions_abort_the_transaction(tmp_path: Path) -> None:
    side = eos_sidecar(tmp_path)
    side.send(schedule("p0", 0), partition=0)
    side.send(schedule("p1", 0), partition=1)
    side.turns(3, advance_ms=200)
    side.consumer.rebalance("lost", [(DELAY, 1)])
    side.turns(3, advance_ms=200)
    side.checkpoint()
    assert txn_producer(side).aborts == 1
    assert ids(side) == Counter({"p0": 1})  # p1 waits for its next owner
    side.stop()


def test_a_shrunk_dead_letter_stays_shrunk_after_another_record_aborts_it(
    tmp_path: Path,
) -> None:
    side = eos_sidecar(tmp_path)
    side.send([("delay-target-topic", ORDERS), ("delay-ms", "--5")], value=b"x" * 1000)
    txn_producer(side).fail_next(DLT, KafkaError.MSG_SIZE_TOO_LARGE)
    side.turns(2)
    side.checkpoint()  # aborted: the dead letter was too large for its topic
    side.send(schedule("now0", 0))
    txn_producer(side).fail_next(ORDERS, KafkaError.NOT_ENOUGH_REPLICAS)
    side.turns(3, advance_ms=200)
    side.checkpoint()  # aborted again, by the delivery: the shrunk dead letter with it
    side.turns(3, advance_ms=200)
    side.checkpoint()
    dead = side.cluster.records(DLT)
    assert [(m.value(), txn_producer(side).aborts) for m in dead] == [(None, 2)]
    side.stop()
