"""The header contract end to end on a real broker: every form, every bad input, cancels."""

from __future__ import annotations

import os
import subprocess
from typing import Any

import pytest

from tests.integration.sidecar.harness import (
    InProcessSidecar,
    Topics,
    Watcher,
    native,
    now_ms,
    produce,
    send,
)
from tests.integration.sidecar.kcat import kcat
from tests.kafka_cluster import RecordWithHeaders

pytestmark = pytest.mark.kafka

H = list[tuple[str, str | bytes | None]]


def _by_id(watcher: Watcher) -> dict[str, Any]:
    return {a.id: a for a in watcher.arrivals if a.id}


def test_every_header_form_delivers_on_time(
    kafka: Any, topics: Topics, sidecar: InProcessSidecar, watcher: Watcher
) -> None:
    orders = topics.targets[0]
    t = now_ms()
    sec = t // 1000 + 2
    forms: dict[str, H] = {
        "native-ms": [
            ("delay-target-topic", orders),
            ("delay-ms", "800"),
            ("delay-id", "native-ms"),
        ],
        "native-sec": [
            ("delay-target-topic", orders),
            ("delay-sec", "1"),
            ("delay-id", "native-sec"),
        ],
        "at-ms": [
            ("delay-target-topic", orders),
            ("deliver-at-ms", str(t + 1200)),
            ("delay-id", "at-ms"),
        ],
        "at-rfc": [
            ("delay-target-topic", orders),
            ("deliver-at", _rfc3339(t + 1000)),
            ("delay-id", "at-rfc"),
        ],
        "rmq5-ms": [
            ("delay-target-topic", orders),
            ("TIMER_DELIVER_MS", str(t + 900)),
            ("UNIQ_KEY", "rmq5-ms"),
        ],
        "rmq5-delay": [
            ("delay-target-topic", orders),
            ("TIMER_DELAY_MS", "700"),
            ("UNIQ_KEY", "rmq5-delay"),
        ],
        "rmq5-sec": [
            ("delay-target-topic", orders),
            ("TIMER_DELAY_SEC", "1"),
            ("UNIQ_KEY", "rmq5-sec"),
        ],
        "rmq4-level": [("delay-target-topic", orders), ("DELAY", "1"), ("delay-id", "rmq4-level")],
    }
    records: list[RecordWithHeaders] = [
        (k.encode(), b"v-" + k.encode(), h) for k, h in forms.items()
    ]
    records.append(
        (
            b"etf1-key",
            b"v-etf1",
            [
                ("scheduler-epoch", str(sec)),
                ("scheduler-target-topic", orders),
                ("scheduler-target-key", "etf1-target-key"),
                ("trace", "keep-me"),
            ],
        )
    )
    produce(kafka.bootstrap_servers, topics.delay, records)
    expected = set(forms) | {"etf1-key"}
    watcher.until(lambda a: expected <= {x.id for x in a}, 30, "every header form delivered")
    got = _by_id(watcher)
    for id in expected:
        arrival = got[id]
        assert arrival.timestamp_ms >= arrival.due_ms, f"{id} delivered early"
        assert arrival.timestamp_ms - arrival.due_ms < 2_000, f"{id} late"
        assert arrival.headers["delay-origin"].startswith(topics.delay + "/")
        assert (
            not {"delay-ms", "delay-target-topic", "TIMER_DELAY_SEC", "DELAY"}
            & arrival.headers.keys()
        )
    assert got["native-ms"].due_ms >= t + 800
    assert got["etf1-key"].key == b"etf1-target-key"
    assert got["etf1-key"].headers["trace"] == "keep-me"
    assert got["etf1-key"].due_ms == sec * 1000
    assert got["rmq5-sec"].headers["UNIQ_KEY"] == "rmq5-sec"


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ([("delay-ms", "10")], "missing-target"),
        ([("delay-target-topic", "{t}"), ("delay-ms", "soon")], "bad-time"),
        ([("delay-target-topic", "{t}"), ("delay-ms", "1"), ("delay-ms", "2")], "conflicting-time"),
        ([("delay-target-topic", "{t}"), ("delay-sec", str(400 * 86400))], "delay-too-long"),
        ([("delay-target-topic", "{t}"), ("DELAY", "x")], "unknown-delay-level"),
        ([("delay-target-topic", "not a topic"), ("delay-ms", "1")], "bad-target"),
        ([("delay-target-topic", "{t}"), ("delay-ms", b"\xff\xfe")], "bad-header"),
    ],
)
def test_bad_input_goes_to_dead_letter_topic(
    kafka: Any,
    topics: Topics,
    sidecar: InProcessSidecar,
    watcher: Watcher,
    headers: H,
    reason: str,
) -> None:
    headers = [
        (k, v.replace("{t}", topics.targets[0]) if isinstance(v, str) else v) for k, v in headers
    ]
    (offset,) = produce(kafka.bootstrap_servers, topics.delay, [(b"bad", b"payload", headers)], 0)
    # A good record behind it proves the partition is not blocked.
    send(
        kafka.bootstrap_servers,
        topics.delay,
        native(topics.targets[0], "after-bad", ("delay-ms", "1")),
        partition=0,
    )
    watcher.until(
        lambda a: (
            "after-bad" in {x.id for x in a} and any(x.topic == topics.dead_letter for x in a)
        ),
        30,
        "dead letter + next",
    )
    (dead,) = [a for a in watcher.arrivals if a.topic == topics.dead_letter]
    assert dead.headers["delay-error"] == reason
    assert dead.headers["delay-error-detail"]
    assert dead.headers["delay-origin"] == f"{topics.delay}/0/{offset}"
    assert dead.value == b"payload" and dead.key == b"bad"


def test_past_due_delivered_at_once(
    kafka: Any, topics: Topics, sidecar: InProcessSidecar, watcher: Watcher
) -> None:
    t = now_ms()
    send(
        kafka.bootstrap_servers,
        topics.delay,
        native(topics.targets[0], "past", ("deliver-at-ms", str(t - 3_600_000))),
    )
    watcher.until(lambda a: "past" in {x.id for x in a}, 15, "past-due delivered")
    assert _by_id(watcher)["past"].timestamp_ms - t < 5_000


def test_precedence_on_the_wire(
    kafka: Any, topics: Topics, sidecar: InProcessSidecar, watcher: Watcher
) -> None:
    t = now_ms()
    timing = [("DELAY", "18"), ("delay-sec", "3600"), ("deliver-at-ms", str(t + 500))]
    send(kafka.bootstrap_servers, topics.delay, native(topics.targets[0], "prec", *timing))
    watcher.until(lambda a: "prec" in {x.id for x in a}, 15, "deliver-at-ms wins")
    assert _by_id(watcher)["prec"].due_ms == t + 500


def test_fifo_within_a_tick_per_source_partition(
    kafka: Any, topics: Topics, sidecar: InProcessSidecar, watcher: Watcher
) -> None:
    due = now_ms() + 1_500
    n = 500
    records: list[RecordWithHeaders] = [
        (b"same-key", str(i).encode(), native(topics.targets[1], f"fifo-{i}", at(due)))
        for i in range(n)
    ]
    produce(kafka.bootstrap_servers, topics.delay, records, partition=1)
    watcher.until(lambda a: len([x for x in a if x.id.startswith("fifo-")]) >= n, 30, "all fifo")
    values = [int(a.value or b"-1") for a in watcher.arrivals if a.id.startswith("fifo-")]
    assert values == list(range(n))
    assert all(a.timestamp_ms >= due for a in watcher.arrivals)


@pytest.mark.parametrize("where", ["same-partition", "other-partition", "etf1-tombstone", "rmq5"])
def test_cancel(
    kafka: Any, topics: Topics, sidecar: InProcessSidecar, watcher: Watcher, where: str
) -> None:
    target = topics.targets[0]
    keep = native(target, "keep", ("delay-ms", "2500"))
    if where == "etf1-tombstone":
        victim: H = [
            ("scheduler-epoch", str(now_ms() // 1000 + 3)),
            ("scheduler-target-topic", target),
        ]
        produce(
            kafka.bootstrap_servers,
            topics.delay,
            [(b"victim", b"v", victim), (b"k", b"v", keep)],
            0,
        )
        send(kafka.bootstrap_servers, topics.delay, [], key=b"victim", value=None, partition=2)
    else:
        victim = native(target, "victim", ("delay-ms", "2500"))
        produce(
            kafka.bootstrap_servers, topics.delay, [(b"k", b"v", victim), (b"k", b"v", keep)], 0
        )
        cancel: H = (
            [("delay-cancel", "victim")] if where != "rmq5" else [("TIMER_DEL_UNIQKEY", "victim")]
        )
        partition = 0 if where == "same-partition" else 2
        send(kafka.bootstrap_servers, topics.delay, cancel, partition=partition)
    watcher.until(lambda a: "keep" in {x.id for x in a}, 20, "the kept message")
    watcher.settle(1.5)
    assert "victim" not in watcher.ids(), f"cancelled message delivered ({where})"


def test_cancel_naming_another_topic_cancels_nothing(
    kafka: Any, topics: Topics, sidecar: InProcessSidecar, watcher: Watcher
) -> None:
    send(
        kafka.bootstrap_servers,
        topics.delay,
        native(topics.targets[0], "same-id", ("delay-ms", "1500")),
    )
    cancel: H = [("delay-cancel", "same-id"), ("delay-target-topic", topics.targets[1])]
    send(kafka.bootstrap_servers, topics.delay, cancel)
    watcher.until(lambda a: "same-id" in {x.id for x in a}, 20, "not cancelled")


def test_missing_target_topic_retried_then_dead_lettered(
    kafka: Any, topics: Topics, sidecar: InProcessSidecar, watcher: Watcher
) -> None:
    nowhere = f"{topics.delay}-nowhere"
    send(kafka.bootstrap_servers, topics.delay, native(nowhere, "lost-topic", ("delay-ms", "1")))
    watcher.until(lambda a: any(x.topic == topics.dead_letter for x in a), 60, "dead-lettered")
    (dead,) = [a for a in watcher.arrivals if a.topic == topics.dead_letter]
    assert dead.headers["delay-error"] == "target-topic-missing"
    assert dead.headers["delay-id"] == "lost-topic"


def test_record_too_large_for_target_is_dead_lettered(
    kafka: Any, topics: Topics, sidecar: InProcessSidecar, watcher: Watcher
) -> None:
    small = kafka.create_topic("small", config={"max.message.bytes": "2000"})
    big = os.urandom(50_000)  # incompressible: lz4 must not shrink it under the limit
    send(kafka.bootstrap_servers, topics.delay, native(small, "big", ("delay-ms", "1")), value=big)
    watcher.until(lambda a: any(x.topic == topics.dead_letter for x in a), 60, "dead-lettered")
    (dead,) = [a for a in watcher.arrivals if a.topic == topics.dead_letter]
    assert dead.headers["delay-error"] == "record-too-large"
    assert dead.value == big


def test_a_producer_that_is_not_python_kcat(
    kafka: Any, topics: Topics, sidecar: InProcessSidecar, watcher: Watcher
) -> None:
    subprocess.run(
        [
            kcat(),
            "-P",
            "-b",
            kafka.bootstrap_servers,
            "-t",
            topics.delay,
            "-k",
            "kcat-key",
            "-H",
            f"delay-target-topic={topics.targets[1]}",
            "-H",
            "delay-ms=700",
            "-H",
            "delay-id=from-kcat",
            "-H",
            "team=ops",
        ],
        input=b"hello from kcat\n",
        check=True,
        timeout=30,
    )
    watcher.until(lambda a: "from-kcat" in {x.id for x in a}, 20, "kcat record delivered")
    arrival = _by_id(watcher)["from-kcat"]
    assert arrival.value == b"hello from kcat"
    assert arrival.key == b"kcat-key"
    assert arrival.headers["team"] == "ops"
    assert arrival.timestamp_ms >= arrival.due_ms


def at(due_ms: int) -> tuple[str, str]:
    return ("deliver-at-ms", str(due_ms))


def _rfc3339(ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def test_admin_lookup_pause_and_cancel(
    kafka: Any, topics: Topics, sidecar: InProcessSidecar, watcher: Watcher
) -> None:
    from delaybridge.bridge.flow import Direction

    service = sidecar.service.control
    service.pause(Direction.DEQUEUE)
    assert Direction.DEQUEUE in service.paused()
    for id in ("admin-victim", "admin-keep"):
        send(
            kafka.bootstrap_servers,
            topics.delay,
            native(topics.targets[0], id, ("delay-ms", "500")),
        )
    sidecar.wait_for(lambda: service.lookup("admin-keep") is not None, 20, "stored")
    found = service.lookup("admin-victim")
    assert found is not None and found["target_topic"] == topics.targets[0]
    assert service.lookup("no-such-id") is None
    assert service.cancel("admin-victim", None)["matched_here"] is True
    watcher.settle(1.5)
    assert not watcher.ids(), "delivered while dequeue was paused"
    service.resume(Direction.DEQUEUE)
    watcher.until(lambda a: "admin-keep" in {x.id for x in a}, 15, "delivered after resume")
    watcher.settle(1.0)
    assert "admin-victim" not in watcher.ids()
    assert service.stats()["partitions"]
