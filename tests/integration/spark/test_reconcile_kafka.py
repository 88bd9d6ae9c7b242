"""Reconciliation on real Kafka with real PySpark: seeded topics holding every case.

The seed is a table of cases, each a few records with explicit timestamps, so the
expected counts follow from reading it (one line per message id):

==============  ====================================================  ==================
id              what the topics hold                                   outcome
==============  ====================================================  ==================
ok              scheduled twice (the second replaces), delivered late  delivered + replaced
missing         scheduled, never delivered                             missing
dup             delivered twice                                        duplicated
early           delivered 10 ms before due                             early
late            delivered 5 s after due                                late
cxl             ``delay-cancel`` before due (other partition)          cancelled
moved           replaced by a later schedule due sooner, delivered     replaced + delivered
keep            sent twice, the second with ``delay-on-duplicate: keep``  delivered twice
again           cancelled, then sent again and delivered               cancelled + delivered
tl              cancel after due, delivered                            cancel too late
ign             cancel before due, delivered anyway                    cancel ignored
mal             only delivery has ``delay-due-ms: soon``               missing + malformed
etf             etf1 schedule, cancelled by a tombstone                cancelled
rmq1            RocketMQ schedule, ``TIMER_DEL_UNIQKEY`` cancel        cancelled
rel             ``delay-ms: 2000`` from its timestamp, delivered       delivered
future          due in an hour                                         pending
lost            target topic does not exist                            missing
(ghost)         cancel of an unknown id                                cancel_unknown
(bad)           ``delay-ms: abc``; no target at all                    rejected
(plain, ...)    target records: no delay-id, bad origin, stranger      side counts
==============  ====================================================  ==================
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from delaybridge.spark.job import run_reconciliation
from delaybridge.spark.report import EXIT_OK, EXIT_PROBLEMS, Counts, Report
from delaybridge.spark.settings import ReconcileSettings

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

Headers = list[tuple[str, str | bytes | None]]


@dataclass(frozen=True)
class Seeded:
    delay: str
    t1: str
    t2: str
    absent: str
    base_ms: int


def _h(**pairs: str | None) -> Headers:
    return [(k.replace("_", "-"), None if v is None else v.encode()) for k, v in pairs.items()]


def _delivery(message_id: str, due_ms: int, origin: str) -> Headers:
    return [
        ("delay-id", message_id.encode()),
        ("delay-origin", origin.encode()),
        ("delay-due-ms", str(due_ms).encode()),
    ]


@pytest.fixture(scope="module")
def seeded(kafka: Any) -> Seeded:
    delay = kafka.create_topic("recon-delay", partitions=2)
    t1 = kafka.create_topic("recon-t1", partitions=2)
    t2 = kafka.create_topic("recon-t2")
    absent = f"recon-absent-{uuid.uuid4().hex[:8]}"
    now_ms = time.time_ns() // 1_000_000
    base = (now_ms - 3_600_000) // 60_000 * 60_000  # a minute boundary an hour ago
    sent_at = base - 60_000
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "acks": "all"})
    offsets: dict[tuple[str, int], int] = {}  # fresh topics, one producer: offsets in order

    def put(
        topic: str,
        partition: int,
        ts: int,
        headers: Headers,
        key: str = "k",
        value: bytes | None = b"v",
    ) -> str:
        """Produce; returns the record's origin ``topic/partition/offset``."""
        producer.produce(
            topic, value, key.encode(), partition=partition, timestamp=ts, headers=headers
        )
        offset = offsets.get((topic, partition), 0)
        offsets[(topic, partition)] = offset + 1
        return f"{topic}/{partition}/{offset}"

    def schedule(message_id: str, due_ms: int, target: str, partition: int = 0) -> str:
        return put(
            delay,
            partition,
            sent_at,
            _h(delay_target_topic=target, deliver_at_ms=str(due_ms), delay_id=message_id),
        )

    def deliver(
        message_id: str, due_ms: int, at_ms: int, origin: str, topic: str | None = None
    ) -> None:
        put(topic or t1, 0, at_ms, _delivery(message_id, due_ms, origin))

    origin = f"{delay}/0/999"  # no such record
    # T1: one message per outcome.
    schedule("ok", base + 1_000, t1)
    ok = schedule("ok", base + 1_000, t1, partition=1)  # a tie: the greater partition wins
    deliver("ok", base + 1_000, base + 1_050, ok)
    schedule("missing", base + 2_000, t1)
    dup_o = schedule("dup", base + 3_000, t1)
    deliver("dup", base + 3_000, base + 3_010, dup_o)
    deliver("dup", base + 3_000, base + 3_020, dup_o)
    early_o = schedule("early", base + 4_000, t1)
    deliver("early", base + 4_000, base + 3_990, early_o)
    late_o = schedule("late", base + 5_000, t1)
    deliver("late", base + 5_000, base + 10_000, late_o)
    schedule("cxl", base + 6_000, t1)
    put(delay, 1, base - 30_000, _h(delay_cancel="cxl"))
    tl_o = schedule("tl", base + 7_000, t1)
    put(delay, 1, base + 8_000, _h(delay_cancel="tl"))
    deliver("tl", base + 7_000, base + 7_010, tl_o)
    ign_o = schedule("ign", base + 9_000, t1)
    put(delay, 0, base - 1_000, _h(delay_cancel="ign"))
    deliver("ign", base + 9_000, base + 9_005, ign_o)
    schedule("moved", base + 20_000, t1)
    moved = put(
        delay,
        1,
        base - 10_000,
        _h(delay_target_topic=t1, deliver_at_ms=str(base + 11_000), delay_id="moved"),
    )
    deliver("moved", base + 11_000, base + 11_010, moved)
    keep = [schedule("keep", base + 12_000, t1)]
    keep.append(
        put(
            delay,
            1,
            base - 10_000,
            _h(
                delay_target_topic=t1,
                deliver_at_ms=str(base + 12_000),
                delay_id="keep",
                delay_on_duplicate="keep",
            ),
        )
    )
    for kept in keep:
        deliver("keep", base + 12_000, base + 12_010, kept)
    schedule("again", base + 13_000, t1)
    put(delay, 1, base - 20_000, _h(delay_cancel="again"))
    again = put(
        delay,
        0,
        base - 10_000,
        _h(delay_target_topic=t1, deliver_at_ms=str(base + 13_000), delay_id="again"),
    )
    deliver("again", base + 13_000, base + 13_010, again)
    schedule("mal", base + 10_000, t1)
    put(
        t1,
        1,
        base + 10_020,
        [("delay-id", b"mal"), ("delay-origin", origin.encode()), ("delay-due-ms", b"soon")],
    )
    # T1 records outside the join.
    put(t1, 1, base + 500, [("trace", b"1")], key="plain", value=b"not from the sidecar")
    put(
        t1,
        1,
        base + 600,
        [
            ("delay-id", b"badorigin"),
            ("delay-origin", b"nonsense"),
            ("delay-due-ms", str(base).encode()),
        ],
    )
    deliver("stranger", base + 700, base + 700, origin)
    # T2: compatibility headers and relative delays, all through classify().
    epoch_s = (base + 120_000) // 1000
    put(delay, 1, sent_at, _h(scheduler_epoch=str(epoch_s), scheduler_target_topic=t2), key="etf")
    put(delay, 0, base - 30_000, [], key="etf", value=None)  # etf1 tombstone cancel
    put(
        delay,
        0,
        sent_at,
        [
            ("delay-target-topic", t2.encode()),
            ("TIMER_DELIVER_MS", str(base + 1_000).encode()),
            ("UNIQ_KEY", b"rmq1"),
        ],
    )
    put(delay, 1, base - 30_000, [("TIMER_DEL_UNIQKEY", b"rmq1")])
    rel = put(delay, 0, sent_at, _h(delay_target_topic=t2, delay_ms="2000", delay_id="rel"))
    deliver("rel", sent_at + 2_000, sent_at + 2_100, rel, topic=t2)
    schedule("future", now_ms + 3_600_000, t2)
    schedule("lost", base + 2_000, absent)
    # Delay-topic records that are not schedules.
    put(delay, 0, sent_at, _h(delay_cancel="ghost"))
    put(delay, 1, sent_at, _h(delay_target_topic=t1, delay_ms="abc"))
    put(delay, 1, sent_at, _h(deliver_at_ms=str(base)))  # no target, no route
    assert producer.flush(30) == 0, "seed records still queued after 30 s"
    return Seeded(delay, t1, t2, absent, base)


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory: Any) -> Path:
    return Path(tmp_path_factory.mktemp("reconcile"))


@pytest.fixture(scope="module")
def report(seeded: Seeded, kafka: Any, spark: Any, out_dir: Path) -> Report:
    out = out_dir
    settings = ReconcileSettings(
        bootstrap_servers=kafka.bootstrap_servers,
        delay_topics=(seeded.delay,),
        output_dir=out,
        progress=False,
        shuffle_partitions=2,
    )
    return run_reconciliation(settings, spark=spark)


def _target(report: Report, topic: str) -> Any:
    (found,) = [t for t in report.targets if t.topic == topic]
    return found


def test_target_topic_counts_are_exact(report: Report, seeded: Seeded) -> None:
    t1 = _target(report, seeded.t1).counts
    assert (t1.sent, t1.cancelled, t1.replaced, t1.due, t1.delivered) == (16, 3, 2, 11, 9)
    assert (t1.missing, t1.duplicated, t1.extra_copies, t1.early, t1.late) == (2, 1, 1, 1, 1)
    assert (t1.pending, t1.cancel_ignored, t1.cancel_too_late) == (0, 1, 1)
    assert (t1.lateness_max_ms, t1.lateness_p50_ms) == (5_000, 10)
    t2 = _target(report, seeded.t2).counts
    assert (t2.sent, t2.cancelled, t2.due, t2.delivered, t2.missing, t2.pending) == (
        4,
        2,
        1,
        1,
        0,
        1,
    )
    assert t2.lateness_max_ms == 100
    lost = _target(report, seeded.absent)
    assert not lost.exists
    assert (lost.counts.sent, lost.counts.missing) == (1, 1)


def test_totals_and_verdict(report: Report) -> None:
    t = report.totals
    assert (t.sent, t.cancelled, t.due, t.delivered, t.missing) == (21, 5, 13, 10, 3)
    assert (t.duplicated, t.early, t.late, t.pending) == (1, 1, 1, 1)
    assert report.failures == ["3 missing", "1 early"]
    assert report.exit_code == EXIT_PROBLEMS


def test_records_outside_the_join(report: Report, seeded: Seeded) -> None:
    t1 = _target(report, seeded.t1)
    assert (t1.records, t1.no_delay_id, t1.malformed, t1.unmatched) == (15, 1, 2, 1)
    (delay,) = report.delay_topics
    assert (delay.records, delay.schedules, delay.resent) == (30, 21, 4)
    assert (delay.cancels, delay.cancel_unknown) == (7, 1)
    assert delay.rejected == {"bad-time": 1, "missing-target": 1}
    malformed = {row["delay_id"]: row["problem"] for row in report.examples["malformed"]}
    assert malformed == {
        "mal": "delay-due-ms is not a decimal number",
        "badorigin": "delay-origin is not topic/partition/offset",
    }


def test_windows_and_examples(report: Report, seeded: Seeded) -> None:
    t1_windows = [w for w in report.windows if w.target_topic == seeded.t1]
    assert [w.window_start_ms for w in t1_windows] == [seeded.base_ms]
    assert t1_windows[0].counts == _target(report, seeded.t1).counts
    assert sum(w.counts.sent for w in report.windows) == report.totals.sent
    assert sorted(e["id"] for e in report.examples["missing"]) == ["lost", "mal", "missing"]
    assert [e["id"] for e in report.examples["early"]] == ["early"]
    assert [e["id"] for e in report.examples["cancel_ignored"]] == ["ign"]
    assert sum(report.lateness_histogram) == report.totals.delivered


def test_output_files(report: Report, out_dir: Path) -> None:
    import pyarrow.parquet as pq

    out = out_dir
    data = json.loads((out / "report.json").read_text())
    assert data["ok"] is False and data["totals"]["missing"] == 3
    windows = pq.read_table(out / "windows.parquet").to_pylist()
    assert sum(row["sent"] for row in windows) == 21
    problems = pq.read_table(out / "problems").to_pylist()
    assert sorted(row["id"] for row in problems) == sorted(
        ["missing", "mal", "lost", "dup", "early", "late", "ign"]
    )
    assert (out / "reconcile.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_clean_topics_pass(kafka: Any, spark: Any, tmp_path: Path) -> None:
    delay = kafka.create_topic("recon-clean-delay")
    target = kafka.create_topic("recon-clean-target")
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "acks": "all"})
    due = time.time_ns() // 1_000_000 - 600_000
    for i in range(20):
        producer.produce(
            delay,
            b"v",
            timestamp=due - 60_000,
            headers=_h(delay_target_topic=target, deliver_at_ms=str(due + i), delay_id=f"c{i}"),
        )
        producer.produce(
            target,
            b"v",
            timestamp=due + i + 80,
            headers=_delivery(f"c{i}", due + i, f"{delay}/0/{i}"),
        )
    assert producer.flush(30) == 0
    settings = ReconcileSettings(
        bootstrap_servers=kafka.bootstrap_servers,
        delay_topics=(delay,),
        target_topics=(target,),
        output_dir=None,
        progress=False,
    )
    report = run_reconciliation(settings, spark=spark)
    assert report.totals == Counts(
        sent=20, due=20, delivered=20, lateness_p50_ms=80, lateness_p99_ms=80, lateness_max_ms=80
    )
    assert report.exit_code == EXIT_OK


def test_a_message_sent_past_due_is_late_only_from_its_send_time(kafka: Any, spark: Any) -> None:
    """Lateness counts from max(due, the schedule record's timestamp): a message sent a
    minute past due and delivered at once is on time, not a minute late."""
    delay = kafka.create_topic("recon-pastdue-delay")
    target = kafka.create_topic("recon-pastdue-target")
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "acks": "all"})
    sent = time.time_ns() // 1_000_000 - 600_000
    cases = {  # id: (due, delivered); every schedule record is written at `sent`
        "at-once": (sent - 60_000, sent + 40),  # sent past due, delivered at once
        "slow": (sent - 60_000, sent + 5_000),  # sent past due, then 5 s late
        "normal": (sent + 1_000, sent + 1_020),
    }
    for i, (id, (due, at)) in enumerate(cases.items()):
        headers = _h(delay_target_topic=target, deliver_at_ms=str(due), delay_id=id)
        producer.produce(delay, b"v", timestamp=sent, headers=headers)
        producer.produce(target, b"v", timestamp=at, headers=_delivery(id, due, f"{delay}/0/{i}"))
    assert producer.flush(30) == 0
    settings = ReconcileSettings(
        bootstrap_servers=kafka.bootstrap_servers,
        delay_topics=(delay,),
        target_topics=(target,),
        output_dir=None,
        progress=False,
    )
    totals = run_reconciliation(settings, spark=spark).totals
    assert (totals.delivered, totals.early, totals.late) == (3, 0, 1)
    assert (totals.lateness_p50_ms, totals.lateness_max_ms) == (40, 5_000)


def test_an_expired_message_counts_as_expired_not_missing(kafka: Any, spark: Any) -> None:
    """``delay-expire-after`` (contract/expiry.py): a message the sidecar dead-lettered as
    ``expired`` is accounted for; one with no dead letter and no delivery is missing; a
    dead letter of another reason, or of another origin, proves nothing."""
    delay = kafka.create_topic("recon-expiry-delay")
    target = kafka.create_topic("recon-expiry-target")
    dlt = kafka.create_topic("recon-expiry-dlt")
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "acks": "all"})
    sent = time.time_ns() // 1_000_000 - 600_000
    ids = ["delivered", "expired", "missing", "other-reason"]
    for id in ids:
        headers = _h(
            delay_target_topic=target,
            deliver_at_ms=str(sent + 1_000),
            delay_id=id,
            delay_expire_after="1s",
        )
        producer.produce(delay, b"v", timestamp=sent, headers=headers)
    origin = f"{delay}/0/"
    producer.produce(
        target,
        b"v",
        timestamp=sent + 1_010,
        headers=_delivery("delivered", sent + 1_000, f"{origin}0"),
    )
    for id, i, reason in (("expired", 1, "expired"), ("other-reason", 3, "target-unavailable")):
        dead = [
            *_delivery(id, sent + 1_000, f"{origin}{i}"),
            ("delay-error", reason.encode()),
            ("delay-error-detail", b"past its deadline"),
        ]
        producer.produce(dlt, b"v", timestamp=sent + 3_000, headers=dead)
    assert producer.flush(30) == 0
    settings = ReconcileSettings(
        bootstrap_servers=kafka.bootstrap_servers,
        delay_topics=(delay,),
        target_topics=(target,),
        dead_letter_topic=dlt,
        output_dir=None,
        progress=False,
    )
    totals = run_reconciliation(settings, spark=spark).totals
    assert (totals.sent, totals.due, totals.delivered) == (4, 4, 1)
    assert (totals.expired, totals.missing) == (1, 2)
    without = run_reconciliation(dataclasses.replace(settings, dead_letter_topic=None), spark=spark)
    assert (without.totals.expired, without.totals.missing) == (0, 3)


def test_a_prefix_cancelled_message_counts_as_cancelled_not_missing(kafka: Any, spark: Any) -> None:
    """``delay-cancel-prefix`` (issue 27): the messages whose id starts with the prefix
    and were sent before it are cancelled, in whichever partition; one sent after it, or
    with another id, is owed and delivered."""
    delay = kafka.create_topic("recon-prefix-delay", partitions=2)
    target = kafka.create_topic("recon-prefix-target")
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "acks": "all"})
    sent = time.time_ns() // 1_000_000 - 600_000
    offsets = [0, 0]
    cases = [  # id, partition, sent at, delivered?
        ("acme/1", 0, sent, False),
        ("acme/2", 1, sent, False),
        ("acme/late", 0, sent + 2_000, True),  # sent after the cancel
        ("other/1", 1, sent, True),
    ]
    for id, partition, at, delivered in cases:
        headers = _h(delay_target_topic=target, deliver_at_ms=str(sent + 60_000), delay_id=id)
        producer.produce(delay, b"v", partition=partition, timestamp=at, headers=headers)
        origin = f"{delay}/{partition}/{offsets[partition]}"
        offsets[partition] += 1
        if delivered:
            due = str(sent + 60_000)
            producer.produce(
                target,
                b"v",
                timestamp=sent + 60_020,
                headers=[
                    ("delay-id", id.encode()),
                    ("delay-origin", origin.encode()),
                    ("delay-due-ms", due.encode()),
                ],
            )
    cancel = _h(delay_cancel_prefix="acme/")
    producer.produce(delay, b"", partition=1, timestamp=sent + 1_000, headers=cancel)
    assert producer.flush(30) == 0
    settings = ReconcileSettings(
        bootstrap_servers=kafka.bootstrap_servers,
        delay_topics=(delay,),
        target_topics=(target,),
        output_dir=None,
        progress=False,
    )
    report = run_reconciliation(settings, spark=spark)
    t = report.totals
    assert (t.sent, t.cancelled, t.due, t.delivered, t.missing) == (4, 2, 2, 2, 0)
    assert (t.early, t.cancel_ignored) == (0, 0)
    assert report.exit_code == EXIT_OK


def test_a_prefix_cancel_the_sidecar_refused_cancels_nothing(kafka: Any, spark: Any) -> None:
    """A ``delay-cancel-prefix`` dead-lettered as ``prefix-over-cap`` took nothing: with
    the dead-letter topic read, its messages, delivered, are owed and delivered, not
    "cancel ignored"; without it, the job cannot know and says cancel ignored."""
    delay = kafka.create_topic("recon-refused-delay")
    target = kafka.create_topic("recon-refused-target")
    dlt = kafka.create_topic("recon-refused-dlt")
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "acks": "all"})
    sent = time.time_ns() // 1_000_000 - 600_000
    due = sent + 60_000
    for offset, id in enumerate(("big/1", "big/2")):
        headers = _h(delay_target_topic=target, deliver_at_ms=str(due), delay_id=id)
        producer.produce(delay, b"v", partition=0, timestamp=sent, headers=headers)
        delivery = _delivery(id, due, f"{delay}/0/{offset}")
        producer.produce(target, b"v", timestamp=due + 20, headers=delivery)
    cancel = _h(delay_cancel_prefix="big/")
    producer.produce(delay, b"", partition=0, timestamp=sent + 1_000, headers=cancel)  # offset 2
    refused: Headers = [
        ("delay-origin", f"{delay}/0/2".encode()),
        ("delay-error", b"prefix-over-cap"),
        ("delay-error-detail", b"2 pending match, more than the cap 1"),
    ]
    producer.produce(dlt, b"", timestamp=sent + 1_100, headers=refused)
    assert producer.flush(30) == 0
    settings = ReconcileSettings(
        bootstrap_servers=kafka.bootstrap_servers,
        delay_topics=(delay,),
        target_topics=(target,),
        dead_letter_topic=dlt,
        output_dir=None,
        progress=False,
    )
    t = run_reconciliation(settings, spark=spark).totals
    assert (t.sent, t.cancelled, t.delivered, t.cancel_ignored, t.missing) == (2, 0, 2, 0, 0)
    blind = run_reconciliation(dataclasses.replace(settings, dead_letter_topic=None), spark=spark)
    assert (blind.totals.cancelled, blind.totals.cancel_ignored) == (2, 2)
