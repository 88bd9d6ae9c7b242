"""``ingest_batch``: ingest's one pass over a consumed batch decides exactly as classify().

Ingest used to build a SourceRecord per message, call classify() on it and turn the
Schedule into a TimerRecord, one Python call per step. ``classifier.ingest_batch``
(compiled where built) does it in one pass straight from the librdkafka messages. These
tests hold it to the old loop, written out here as the reference: on random and
hostile records, for every implementation, the same runs (the same TimerRecords, the
same messages, the same replaces), the same side writes with the same decisions and
details, the same replaces of already stored schedules, skipped partitions skipped.
"""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    KafkaError,
    Message,
)
from hypothesis import given
from hypothesis import strategies as st

from delaybridge.contract.decisions import (
    Cancel,
    IngestPlan,
    PartKey,
    Rejected,
    Schedule,
    SourceRecord,
)
from delaybridge.contract.reasons import Reason
from delaybridge.timerlog.records import TimerRecord
from tests.unit.hot_impl import PURE, Impl, available
from tests.unit.test_hotpath_equivalence import RULES, SETTINGS, TS, source_records

IMPLS = available()


def _message(rec: SourceRecord) -> Message:
    kind = TIMESTAMP_LOG_APPEND_TIME if rec.log_append_time else TIMESTAMP_CREATE_TIME
    return Message(
        topic=rec.topic,
        partition=rec.partition,
        offset=rec.offset,
        key=rec.key,
        value=rec.value,
        headers=list(rec.headers) or None,
        timestamp=(kind, rec.timestamp_ms),
    )


def _reference(messages: list[Any], now_ms: int, upto: dict[PartKey, int]) -> IngestPlan:
    """The per-record loop ingest ran before ``ingest_batch``, on pure classify()."""
    plan = IngestPlan({}, {}, [], [], [])
    for msg in messages:
        if msg.error() is not None:
            plan.errors.append(msg)
            continue
        key = (msg.topic(), msg.partition())
        if key not in upto:
            continue
        ts_type, ts = msg.timestamp()
        record = SourceRecord(
            msg.topic(),
            msg.partition(),
            msg.offset(),
            ts,
            msg.key(),
            msg.value(),
            msg.headers() or [],
            ts_type == TIMESTAMP_LOG_APPEND_TIME,
        )
        decision = PURE.classify.classify(record, RULES, now_ms)
        if isinstance(decision, Schedule):
            if record.offset > upto[key]:
                records, msgs, replaces = plan.runs.setdefault(key, ([], [], []))
                records.append(
                    TimerRecord(
                        id=decision.id,
                        due_ms=decision.due_ms,
                        target_topic=decision.target_topic,
                        target_partition=decision.target_partition,
                        key=decision.key,
                        value=record.value,
                        headers=decision.headers,
                        source_offset=record.offset,
                        source_timestamp_ms=record.timestamp_ms,
                    )
                )
                msgs.append(msg)
                if decision.replace:
                    replaces.append(msg)
            elif decision.replace:
                replace = Cancel(decision.id, decision.target_topic)
                plan.stored_replaces.append((key, msg, replace))
            continue
        plan.later.setdefault(key, []).append((msg, decision))
    return plan


def _ingest(impl: Impl, messages: list[Any], now_ms: int, upto: dict[PartKey, int]) -> Any:
    asked: list[PartKey] = []

    def stored_upto(key: PartKey) -> int | None:
        asked.append(key)
        return upto.get(key)

    plan = impl.classify.ingest_batch(messages, RULES, now_ms, stored_upto)
    assert len(asked) == len(set(asked)), "stored_upto is asked once per partition"
    return plan


@pytest.mark.parametrize("impl", IMPLS, ids=lambda i: i.name)
@SETTINGS
@given(
    records=st.lists(source_records, max_size=12),
    now_ms=st.integers(0, 2**45),
    upto=st.dictionaries(
        st.tuples(st.sampled_from(["delay", "routed", "other"]), st.integers(0, 5)),
        st.integers(-1, 2**40),
    ),
)
def test_a_batch_is_decided_and_sorted_as_the_per_record_loop_did(
    impl: Impl, records: list[SourceRecord], now_ms: int, upto: dict[PartKey, int]
) -> None:
    messages = [_message(r) for r in records]
    got = _ingest(impl, messages, now_ms, upto)
    want = _reference(messages, now_ms, upto)
    assert type(got) is IngestPlan
    assert got == want
    for run in got.runs.values():
        assert all(type(rec) is TimerRecord for rec in run[0])
    assert not got.failures


def _schedule(offset: int, *headers: tuple[str, bytes]) -> Message:
    return Message(
        topic="delay",
        partition=0,
        offset=offset,
        key=b"k",
        value=b"v",
        headers=[("delay-target-topic", b"orders"), ("delay-ms", b"5000"), *headers],
        timestamp=(TIMESTAMP_CREATE_TIME, TS),
    )


class BrokenMessage(Message):
    """A message whose header list cannot be read (librdkafka raises on a header name
    that is not UTF-8): a decision that raises something else than a Rejection."""

    def headers(self) -> Any:
        raise RuntimeError("boom")


@pytest.mark.parametrize("impl", IMPLS, ids=lambda i: i.name)
def test_what_raises_is_dead_lettered_as_an_internal_error_and_reported(impl: Impl) -> None:
    broken = BrokenMessage(
        topic="delay", partition=0, offset=2, timestamp=(TIMESTAMP_CREATE_TIME, TS)
    )
    eof = Message(topic="delay", partition=0, error=KafkaError(KafkaError._PARTITION_EOF))
    messages = [_schedule(1), broken, eof, _schedule(3)]
    plan = _ingest(impl, messages, TS, {("delay", 0): -1})
    assert [rec.source_offset for rec in plan.runs[("delay", 0)][0]] == [1, 3]
    assert plan.later == {
        ("delay", 0): [(broken, Rejected(Reason.INTERNAL_ERROR, "RuntimeError: boom"))]
    }
    assert [(key, msg) for key, msg, _ in plan.failures] == [(("delay", 0), broken)]
    assert isinstance(plan.failures[0][2], RuntimeError)
    assert plan.errors == [eof]


@pytest.mark.parametrize("impl", IMPLS, ids=lambda i: i.name)
def test_stored_schedules_are_skipped_and_only_their_replaces_go_out_again(impl: Impl) -> None:
    messages = [
        _schedule(4, ("delay-id", b"a")),
        _schedule(5),
        _schedule(6, ("delay-id", b"b")),
        _schedule(7, ("delay-id", b"c")),
    ]
    plan = _ingest(impl, messages, TS, {("delay", 0): 6})
    assert plan.stored_replaces == [
        (("delay", 0), messages[0], Cancel("a", "orders")),
        (("delay", 0), messages[2], Cancel("b", "orders")),
    ]
    records, msgs, replaces = plan.runs[("delay", 0)]
    assert [r.id for r in records] == ["c"] and msgs == replaces == [messages[3]]


@pytest.mark.parametrize("impl", IMPLS, ids=lambda i: i.name)
def test_records_of_partitions_not_ingesting_are_not_decided(impl: Impl) -> None:
    broken = BrokenMessage(
        topic="delay", partition=1, offset=0, timestamp=(TIMESTAMP_CREATE_TIME, TS)
    )
    plan = _ingest(impl, [broken, _schedule(0)], TS, {("delay", 0): -1})
    assert not plan.failures and not plan.later and list(plan.runs) == [("delay", 0)]
