"""Reconciliation of recurring schedules (issue 14 item 4), real Kafka and PySpark.

A series is expanded into its occurrences due up to the report's time, each expected
once and matched on (``delay-id``, ``delay-occurrence``):

=========  =============================================================  ============
series     what the topics hold                                           outcome
=========  =============================================================  ============
five       ``delay-every: 1m``, ``delay-count: 5``: occurrences 1, 2, 4   4 delivered
           on time, 3 twice and 5 s late, 5 never                         (1 dup, 1
                                                                          late), 1 missing
stopped    ``delay-every: 10m`` without end, cancelled 25 min after it    2 delivered,
           was sent: occurrences 1 and 2 delivered, the rest cancelled    rest cancelled
=========  =============================================================  ============
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Producer

from delaybridge.spark.job import run_reconciliation
from delaybridge.spark.settings import ReconcileSettings

pytestmark = [pytest.mark.kafka, pytest.mark.spark]
MINUTE = 60_000


def test_each_due_occurrence_is_expected_once(kafka: Any, spark: Any) -> None:
    delay = kafka.create_topic("series-delay")
    target = kafka.create_topic("series-target")
    now_ms = time.time_ns() // 1_000_000
    sent = (now_ms - 2 * 3_600_000) // MINUTE * MINUTE  # two hours ago, a minute boundary
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "acks": "all"})

    def put(topic: str, ts: int, headers: dict[str, str], value: bytes = b"v") -> None:
        hs: list[tuple[str, str | bytes | None]] = [(k, v.encode()) for k, v in headers.items()]
        producer.produce(topic, value, b"k", partition=0, timestamp=ts, headers=hs)

    def deliver(id: str, k: int, due_ms: int, at_ms: int) -> None:
        origin = f"{delay}/0/{0 if id == 'five' else 1}"  # the schedule record's offset
        headers = {"delay-id": id, "delay-occurrence": str(k), "delay-origin": origin}
        put(target, at_ms, {**headers, "delay-due-ms": str(due_ms)})

    base = {"delay-target-topic": target}
    put(delay, sent, {**base, "delay-id": "five", "delay-every": "1m", "delay-count": "5"})
    put(delay, sent, {**base, "delay-id": "stopped", "delay-every": "10m"})
    put(delay, sent + 25 * MINUTE, {"delay-cancel": "stopped"})
    for k in (1, 2, 3, 4):
        deliver("five", k, sent + k * MINUTE, sent + k * MINUTE + 20)
    deliver("five", 3, sent + 3 * MINUTE, sent + 3 * MINUTE + 5_000)  # a second copy
    for k in (1, 2):
        deliver("stopped", k, sent + k * 10 * MINUTE, sent + k * 10 * MINUTE + 30)
    assert producer.flush(30) == 0

    report = run_reconciliation(
        ReconcileSettings(
            bootstrap_servers=kafka.bootstrap_servers,
            delay_topics=(delay,),
            progress=False,
            shuffle_partitions=2,
            output_dir=None,  # not ./reconcile-report: a test writes nothing into the checkout
        ),
        spark=spark,
    )
    (found,) = [t for t in report.targets if t.topic == target]
    c = found.counts
    # five: 5 occurrences; stopped: due every 10 min for about two hours (12 or 13 by now)
    stopped = (report.as_of_ms - sent) // (10 * MINUTE)
    assert c.sent == 5 + stopped
    assert (c.delivered, c.missing, c.duplicated, c.early) == (6, 1, 1, 0)
    assert c.cancelled == stopped - 2  # every occurrence due after the cancel
    assert c.late == 0  # the duplicate's first copy was on time
    assert found.unmatched == 0  # every delivery matched its (id, occurrence)
    assert report.failures == ["1 missing"]
    (summary,) = report.delay_topics
    assert summary.resent == 0  # occurrences are not re-sent records
