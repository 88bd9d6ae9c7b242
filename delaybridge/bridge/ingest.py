"""Delay-topic records in: classify, store, re-publish cancels, dead-letter bad input.

:meth:`Ingestor.handle` takes one consumed batch. Each record is classified
(:func:`~delaybridge.bridge.headers.classify`) and then:

- a :class:`Schedule` is appended to its partition's store (in source-offset order, one
  ``append`` call per partition and run of schedules);
- a :class:`Cancel` is produced to the cancel topic (see ``bridge/cancels.py``);
- a :class:`Rejected` record is produced, unchanged, to the dead-letter topic with its
  reason code.

Bad input never raises here and never stops a partition. Offsets are tracked so that a
partition's commit position covers only records that are durable (``bridge/offsets.py``).
One owner thread.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka import KafkaException, Message, Producer

from delaybridge.bridge.cancels import CancelRequest
from delaybridge.bridge.deadletter import dead_letter_headers
from delaybridge.bridge.headers import (
    Cancel,
    HeaderRules,
    Rejected,
    Schedule,
    SourceRecord,
    classify,
)
from delaybridge.bridge.partition import PartitionState
from delaybridge.bridge.reasons import Reason
from delaybridge.connectors.kafka import headers_of
from delaybridge.timerlog import TimerRecord

log = logging.getLogger(__name__)

PartKey = tuple[str, int]


class Ingestor:
    def __init__(
        self, rules: HeaderRules, producer: Producer, dead_letter_topic: str, cancel_topic: str
    ) -> None:
        self._rules = rules
        self._producer = producer
        self._dlt = dead_letter_topic
        self._cancel_topic = cancel_topic
        self.enqueued: Counter[str] = Counter()
        self.dead_lettered: Counter[Reason] = Counter()
        self.cancels_published = 0

    def handle(self, messages: list[Message], parts: Mapping[PartKey, PartitionState]) -> None:
        pending: dict[PartKey, list[TimerRecord]] = {}
        for msg in messages:
            err = msg.error()
            if err is not None:
                if err.code() != RdKafkaError._PARTITION_EOF:
                    log.warning(
                        "consume error on %s [%s]: %s", msg.topic(), msg.partition(), err.str()
                    )
                continue
            topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
            assert topic is not None and partition is not None and offset is not None
            part = parts.get((topic, partition))
            if part is None or part.revoking:
                continue  # revoked while the batch was in flight; the next owner reads it
            _ts_type, ts = msg.timestamp()
            headers = headers_of(msg)
            record = SourceRecord(topic, partition, offset, ts, msg.key(), msg.value(), headers)
            decision = classify(record, self._rules)
            if isinstance(decision, Schedule):
                pending.setdefault((topic, partition), []).append(_timer_record(record, decision))
            elif isinstance(decision, Cancel):
                self._publish_cancel(part, record, decision)
            else:
                self._dead_letter(part, record, decision)
        for key, records in pending.items():
            part = parts[key]
            part.store.append(records)
            part.offsets.handled(records[-1].source_offset)
            self.enqueued[key[0]] += len(records)

    def _publish_cancel(self, part: PartitionState, record: SourceRecord, cancel: Cancel) -> None:
        request = CancelRequest(cancel.id, cancel.target_topic, record.origin)
        self._side_produce(
            part, record.offset, self._cancel_topic, cancel.id.encode(), request.encode(), None
        )
        self.cancels_published += 1

    def _dead_letter(self, part: PartitionState, record: SourceRecord, rej: Rejected) -> None:
        log.info("dead-lettering %s: %s (%s)", record.origin, rej.reason.value, rej.detail)
        headers = dead_letter_headers(record.headers, rej.reason, rej.detail, record.origin)
        self._side_produce(part, record.offset, self._dlt, record.key, record.value, headers)
        self.dead_lettered[rej.reason] += 1

    def _side_produce(
        self,
        part: PartitionState,
        offset: int,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        headers: Any,
    ) -> None:
        """Produce a record whose delay-topic offset may commit only once it is acked.

        A produce that librdkafka gave up on (after its own retries, ``message.timeout.ms``)
        is produced again, so a dead-letter or cancel topic that is down for a while
        delays the commit but loses nothing. One refused outright (it can never succeed,
        e.g. too large even for the dead-letter topic) is logged and its offset stays
        uncommitted: a restart reads it again.
        """
        part.offsets.produce_started(offset)
        where = f"{part.topic}/{part.partition}/{offset}"

        def on_delivery(err: RdKafkaError | None, _msg: Any) -> None:
            if err is None:
                part.offsets.produce_acked(offset)
            elif not part.closed:
                log.warning(
                    "writing %s to %r failed (%s); producing it again", where, topic, err.str()
                )
                send()

        def send() -> None:
            while True:
                try:
                    self._producer.produce(
                        topic, value, key, headers=headers, on_delivery=on_delivery
                    )
                    return
                except BufferError:
                    self._producer.poll(0.05)
                except KafkaException as exc:
                    log.error(
                        "cannot write %s to %r: %s (it will be re-read after a restart)",
                        where, topic, exc,
                    )  # fmt: skip
                    return

        send()


def _timer_record(record: SourceRecord, schedule: Schedule) -> TimerRecord:
    return TimerRecord(
        id=schedule.id,
        due_ms=schedule.due_ms,
        target_topic=schedule.target_topic,
        target_partition=schedule.target_partition,
        key=schedule.key,
        value=record.value,
        headers=schedule.headers,
        source_offset=record.offset,
        source_timestamp_ms=record.timestamp_ms,
    )
