"""Replicas with their own disks: scale 1 -> 3 -> 2, kill -9 one and lose its disk.

Issue 11's acceptance on the real broker: three `delaybridge run` processes in one
group over six partitions, each with its own data directory (as the chart deploys them),
holding 3,000 pending messages while partitions move between them; then one is killed
and its data directory deleted. Every message is delivered, none early, duplicates only
from in-flight windows, and delivery of the lost replica's partitions resumes within
30 s of the kill.
"""

from __future__ import annotations

import random
import re
import shutil
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.integration.sidecar.harness import (
    SubprocessSidecar,
    Topics,
    Watcher,
    iter_chunks,
    now_ms,
    produce,
    settings_for,
)
from tests.kafka_cluster import RecordWithHeaders
from tests.support import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.slow]
N = 3_000
PARTITIONS = 6


def test_scale_1_3_2_then_a_replica_and_its_disk_are_lost(kafka: Any, tmp_path: Path) -> None:
    topics = Topics(
        delay=kafka.create_topic("delay6", partitions=PARTITIONS),
        targets=[kafka.create_topic("orders6", partitions=3)],
        dead_letter=kafka.create_topic("dlt6"),
        cancels=kafka.create_topic("cancels6"),
    )
    group = f"g-{topics.delay}"
    every = {f"{topics.delay}-{p}" for p in range(PARTITIONS)}

    def replica(name: str) -> SubprocessSidecar:
        settings = settings_for(
            kafka.bootstrap_servers,
            topics,
            tmp_path / name,
            group,
            kafka={"instance_id": name},
            shutdown_grace_ms=10_000,
        )
        return SubprocessSidecar(settings, tmp_path, name)

    r1, r2, r3 = replica("r1"), replica("r2"), replica("r3")
    watcher = Watcher(kafka.bootstrap_servers, topics.targets)
    try:
        r1.start()
        _await(lambda: r1.owned() == every, 90, "r1 owns all six partitions", r1)
        # Due from 15 s on, over two minutes: deliveries go on while partitions move,
        # and some fall due while the lost replica's partitions have no owner.
        _send(kafka.bootstrap_servers, topics, now_ms() + 15_000, 120_000)
        _await(lambda: _committed(kafka, group, topics.delay) == N, 60, "all stored", r1)

        r2.start()
        r3.start()  # scale 1 -> 3: moved partitions restore from the changelog
        _await(
            lambda: (
                all(r.owned() for r in (r1, r2, r3))
                and r1.owned() | r2.owned() | r3.owned() == every
                and _restored_all(r1, r2, r3)
            ),
            120,
            "three replicas, every partition owned and restored",
            r1,
            r2,
            r3,
        )
        assert r3.terminate(timeout_s=30) == 0  # scale 3 -> 2
        _await(lambda: r1.owned() | r2.owned() == every, 90, "two replicas own all", r1, r2)

        lost = r2.owned()
        r2.kill9()  # the node is lost, and its disk with it
        killed_ms = now_ms()
        shutil.rmtree(tmp_path / "r2")
        _await(lambda: r1.owned() == every, 90, "r1 takes over the lost partitions", r1)

        watcher.until(lambda a: {x.id for x in a} >= _ids(), 240, "every message delivered")
        watcher.settle(3.0)
    finally:
        for r in (r1, r2, r3):
            if r.proc is not None and r.proc.poll() is None:
                r.terminate(timeout_s=30)
        watcher.close()

    counts = Counter(watcher.ids())
    duplicates = sum(c - 1 for c in counts.values())
    early = [a.id for a in watcher.arrivals if a.timestamp_ms < a.due_ms]
    lost_partitions = {int(p.rsplit("-", 1)[1]) for p in lost}
    stalled = [
        a.timestamp_ms - max(a.due_ms, killed_ms)
        for a in watcher.arrivals
        if int(a.headers["delay-origin"].split("/")[1]) in lost_partitions
    ]
    print(
        f"\n{N} messages over {PARTITIONS} partitions, replicas 1 -> 3 -> 2, then kill -9 "
        f"of one owning {sorted(lost)} with its disk deleted: {duplicates} duplicates, "
        f"{len(early)} early, lost partitions' worst wait after the kill "
        f"{max(stalled, default=0) / 1000:.1f} s"
    )
    assert set(counts) == _ids()
    assert not early
    assert duplicates <= 20_000  # max_in_flight_records: only in-flight windows repeat
    assert max(stalled, default=0) <= 30_000


def _ids() -> set[str]:
    return {f"r-{i}" for i in range(N)}


def _send(bootstrap: str, topics: Topics, first_due: int, spread_ms: int) -> None:
    for chunk in iter_chunks(N, 1_000):
        records: list[RecordWithHeaders] = [
            (
                f"k{i}".encode(),
                f"v{i}".encode(),
                [
                    ("delay-target-topic", topics.targets[0]),
                    ("deliver-at-ms", str(first_due + (i * spread_ms) // N)),
                    ("delay-id", f"r-{i}"),
                ],
            )
            for i in chunk
        ]
        produce(bootstrap, topics.delay, records)


def _committed(kafka: Any, group: str, topic: str) -> int:
    """Records of ``topic`` the group has committed past (stored and in the changelog)."""
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": group})
    try:
        got = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], 10)
    finally:
        consumer.close()
    return sum(max(tp.offset, 0) for tp in got)


def _restored_all(*replicas: SubprocessSidecar) -> bool:
    """No replica is restoring: each owned partition logged it was restored or needed
    nothing (its store was up to date)."""
    for r in replicas:
        text = r.log.read_text(errors="replace")
        for name in r.owned():
            started = text.rfind(f"restoring {name} ")
            if started != -1 and text.rfind(f"restored {name}:") < started:
                return False
    return True


def _await(
    condition: Callable[[], bool], timeout_s: float, what: str, *sides: SubprocessSidecar
) -> None:
    def logs() -> str:
        return "\n\n".join(f"--- {s.log.name}\n{s.tail()}" for s in sides)

    started = time.monotonic()
    wait_until(condition, timeout_s, what, interval_s=0.2, detail=logs)
    print(f"{what}: {time.monotonic() - started:.1f} s")


def test_kill9_at_random_points_of_a_restore_loses_nothing(kafka: Any, tmp_path: Path) -> None:
    topics = Topics(
        delay=kafka.create_topic("delayk", partitions=2),
        targets=[kafka.create_topic("ordersk")],
        dead_letter=kafka.create_topic("dltk"),
        cancels=kafka.create_topic("cancelsk"),
    )
    group = f"g-{topics.delay}"

    def replica(name: str, **overrides: Any) -> SubprocessSidecar:
        settings = settings_for(
            kafka.bootstrap_servers, topics, tmp_path / name, group, **overrides
        )
        return SubprocessSidecar(settings, tmp_path, name)

    first = replica("first")
    first.start()
    first.wait_log("assigned", 60)
    _send(kafka.bootstrap_servers, topics, now_ms() + 60_000, 10_000)
    _await(lambda: _committed(kafka, group, topics.delay) == N, 60, "all stored", first)
    assert first.terminate(timeout_s=30) == 0
    # A new replica with an empty disk restores slowly (small slices); kill it mid-way,
    # again and again, at random moments: each time it resumes where its store got to.
    slow = replica("second", changelog={"restore_batch_records": 20})
    rng = random.Random(20261123)
    for _ in range(5):
        slow.start()
        slow.wait_log("restoring", 60)
        time.sleep(rng.uniform(0.3, 3.0))  # a random point of the restore, not a wait
        slow.kill9()
    slow.start()
    watcher = Watcher(kafka.bootstrap_servers, topics.targets)
    try:
        watcher.until(lambda a: {x.id for x in a} >= _ids(), 180, "every message delivered")
        watcher.settle(2.0)
    finally:
        slow.terminate(timeout_s=30)
        watcher.close()
    counts = Counter(watcher.ids())
    early = [a.id for a in watcher.arrivals if a.timestamp_ms < a.due_ms]
    resumed = [int(m) for m in re.findall(r"offsets \[(\d+), ", slow.log.read_text()) if m != "0"]
    print(
        f"\nrestore killed 5 times, resumed from offsets {resumed}: "
        f"{sum(c - 1 for c in counts.values())} duplicates"
    )
    assert resumed, "no restart resumed a restore part-way"
    assert set(counts) == _ids()
    assert not early
