"""Issue 13, item 1: two worker processes under one ``delaybridge run`` (real broker).

One command, ``workers: 2``: both workers join the group and share the delay topic's
partitions and the data directory; the supervisor's one port answers for both. Messages
on every partition arrive once; ``kill -9`` of one worker gets it restarted and loses
nothing (its partitions' stores are reopened from the shared data directory, not
rebuilt from the changelog); SIGTERM stops everything cleanly (exit code 0).
"""

from __future__ import annotations

import os
import re
import signal
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from delaybridge.settings import Settings
from tests.integration.sidecar.harness import SubprocessSidecar, Topics, Watcher, produce
from tests.integration.sidecar.observe import alive, http, metric, metrics
from tests.support import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.slow]
_PID = re.compile(r"worker (\d+) started: pid (\d+)")


def _pids(side: SubprocessSidecar) -> list[tuple[int, int]]:
    return [(int(w), int(p)) for w, p in _PID.findall(side.log.read_text(errors="replace"))]


def _committed(kafka: Any, group: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": group})
    try:
        got = consumer.committed([TopicPartition(topic, p) for p in range(3)], 10)
    finally:
        consumer.close()
    return sum(max(tp.offset, 0) for tp in got)


def _up(side: SubprocessSidecar) -> bool:
    alive(side)
    return True


def _batch(prefix: str, n: int, target: str, delay_ms: Callable[[int], int]) -> list[Any]:
    return [
        (
            f"k{i}".encode(),
            f"{prefix}-{i}".encode(),
            [
                ("delay-target-topic", target),
                ("delay-id", f"{prefix}-{i}"),
                ("delay-ms", str(delay_ms(i))),
            ],
        )
        for i in range(n)
    ]


@pytest.mark.parametrize(
    ("instance_id", "static"),
    [("", False), ("pod-0", True), ("", True)],
    ids=["dynamic", "static-membership", "static-by-default"],
)
def test_two_workers_share_the_partitions_and_survive_kill9(
    kafka: Any,
    topics: Topics,
    watcher: Watcher,
    tmp_path: Path,
    make_settings: Callable[..., Settings],
    instance_id: str,
    static: bool,
) -> None:
    settings = make_settings(
        workers=2, kafka={"instance_id": instance_id, "static_membership": static}
    )
    side = SubprocessSidecar(settings, tmp_path)
    side.start()
    try:
        _scenario(kafka, topics, watcher, side)
    finally:
        if side.proc is not None and side.proc.poll() is None:
            side.terminate(60)


def _scenario(kafka: Any, topics: Topics, watcher: Watcher, side: SubprocessSidecar) -> None:
    group = f"g-{topics.delay}"
    client = http(side)
    wait_until(
        lambda: _up(side) and client("GET", "/readyz").status == 200,
        90,
        "both workers ready",
        detail=side.tail,
    )
    target = topics.targets[0]

    # The group settles with every partition of the delay topic owned by one of the two
    # workers (the first to join takes all three, the second gets its share).
    def shared() -> bool:
        alive(side)
        stats = client("GET", "/admin/stats").json()
        owners = [(p["topic"], p["partition"], p["worker"]) for p in stats["partitions"]]
        return len({o[:2] for o in owners}) == len(owners) == 3 and {o[2] for o in owners} == {
            "0",
            "1",
        }

    wait_until(shared, 60, "the partitions shared by both workers", detail=side.tail)

    # Phase 1: messages on every partition arrive once.
    first = _batch("a", 300, target, lambda i: 500 + 10 * i)
    produce(kafka.bootstrap_servers, topics.delay, first)
    watcher.until(
        lambda got: {a.id for a in got} >= {f"a-{i}" for i in range(300)},
        60,
        "the first batch delivered",
    )
    watcher.settle(2.0)
    counts = Counter(a.id for a in watcher.arrivals)
    assert all(counts[f"a-{i}"] == 1 for i in range(300)), counts.most_common(3)
    scraped = metrics(client)
    workers = {
        dict(labels).get("worker")
        for (name, labels) in scraped
        if name == "delaybridge_assigned_partitions"
    }
    assert workers == {"0", "1"}, workers
    delivered = sum(v for (name, _), v in scraped.items() if name == "delaybridge_delivered_total")
    assert delivered >= 300

    # Phase 2: kill -9 of worker 1 while messages are pending and due over 8 s.
    second = _batch("b", 400, target, lambda i: 1_000 + 20 * i)
    produce(kafka.bootstrap_servers, topics.delay, second)
    watcher.until(
        lambda got: sum(a.id.startswith("b-") for a in got) >= 50,
        60,
        "some of the second batch delivered",
    )
    (victim,) = [pid for w, pid in _pids(side) if w == 1]
    killed_at = side.log.stat().st_size
    os.kill(victim, signal.SIGKILL)
    wait_until(lambda: len(_pids(side)) >= 3, 30, "worker 1 restarted", detail=side.tail)
    assert metric(client, "delaybridge_worker_restarts_total", worker="1") == 1
    watcher.until(
        lambda got: {a.id for a in got} >= {f"b-{i}" for i in range(400)},
        120,
        "every message of the second batch delivered",
    )
    wait_until(
        lambda: _up(side) and client("GET", "/healthz").status == 200,
        60,
        "healthy again",
        detail=side.tail,
    )
    assert not any(a.timestamp_ms < a.due_ms for a in watcher.arrivals), "early delivery"
    log = side.log.read_text(errors="replace")
    assert "restoring from Kafka" not in log, "a moved partition was rebuilt, not reopened"
    assert "cannot be opened" not in log
    # The killed worker's partitions were reopened from the shared data directory: at
    # most a catch-up of the changelog's tail, never a rebuild from its start.
    after_kill = log.encode()[killed_at:].decode(errors="replace")
    starts = [int(a) for a in re.findall(r"restoring \S+ from \S+ offsets \[(\d+), ", after_kill)]
    assert all(a > 0 for a in starts), after_kill
    # Every record stored is committed (both workers commit the group's offsets).
    wait_until(
        lambda: _committed(kafka, group, topics.delay) == 700,
        30,
        "the group committed past all 700 records",
        detail=side.tail,
    )
    assert side.terminate(60) == 0, side.tail()
    assert "sidecar stopped" in side.log.read_text(errors="replace")
