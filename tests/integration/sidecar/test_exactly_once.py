"""Exactly-once mode on a real broker: kill -9 again and again under load (issue 12).

Two ``delaybridge run`` processes, each with its own data directory and static member
id (as the chart deploys replicas), take a steady stream of delayed messages. 20 times,
at a random moment, one of them is killed with SIGKILL and started again; once, a
replica joins the group mid-run (a rebalance). A read_committed consumer must see every
message exactly once: none lost, none twice, none early.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from delaybridge.settings import Settings
from tests.integration.sidecar.harness import (
    SubprocessSidecar,
    Topics,
    Watcher,
    native,
    now_ms,
    produce,
)
from tests.integration.sidecar.observe import alive

MakeSettings = Callable[..., Settings]

pytestmark = [pytest.mark.kafka, pytest.mark.slow]
ROUNDS = 20


class SteadyLoad:
    """A producer thread: ``rate`` delayed messages per second, due 0-2 s later."""

    def __init__(self, bootstrap: str, topics: Topics, rate: int) -> None:
        self._producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self._topics = topics
        self._rate = rate
        self._stop = threading.Event()
        self.sent = 0
        self._thread = threading.Thread(target=self._run, name="load", daemon=True)

    def __enter__(self) -> SteadyLoad:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert self._producer.flush(30) == 0, "the load's records were not all acknowledged"

    def _run(self) -> None:
        rng = random.Random(12)
        started = time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - started) * self._rate)
            while self.sent < due:
                i = self.sent
                headers: list[tuple[str, str | bytes | None]] = [
                    ("delay-target-topic", self._topics.targets[i % 2]),
                    ("delay-ms", str(rng.randrange(0, 2_000))),
                    ("delay-id", f"eos-{i}"),
                ]
                self._producer.produce(
                    self._topics.delay, f"v{i}".encode(), f"k{i}".encode(), headers=headers
                )
                self.sent += 1
            self._producer.poll(0.01)


def test_kill9_rounds_under_load_deliver_every_message_exactly_once(
    kafka: Any, topics: Topics, watcher: Watcher, tmp_path: Path, make_settings: MakeSettings
) -> None:
    def replica(name: str) -> SubprocessSidecar:
        settings = make_settings(
            kafka={"instance_id": name},
            store={"data_dir": str(tmp_path / name)},
            delivery={"exactly_once": True},
        )
        return SubprocessSidecar(settings, tmp_path, name)

    one, two = replica("one"), replica("two")
    one.start()
    one.wait_log("assigned", 60)
    rng = random.Random(20261123)
    with SteadyLoad(kafka.bootstrap_servers, topics, rate=150) as load:
        try:
            for round in range(ROUNDS):
                if round == ROUNDS // 2:
                    two.start()  # the rebalance: partitions move to a new replica
                    two.wait_log("assigned", 60)
                time.sleep(rng.uniform(0.5, 3.0))  # a random moment, not a wait
                victim = two if two.proc is not None and rng.random() < 0.5 else one
                victim.kill9()
                victim.start()
            time.sleep(2)
        finally:
            load.stop()
            sent = load.sent
            expected = {f"eos-{i}" for i in range(sent)}
            try:
                watcher.until(lambda a: {x.id for x in a} >= expected, 180, "every message")
                watcher.settle(5.0)  # anything delivered twice shows up now
            finally:
                for side in (one, two):
                    if side.proc is not None and side.proc.poll() is None:
                        side.terminate(30)
    counts = Counter(watcher.ids())
    twice = {id: n for id, n in counts.items() if n > 1}
    early = [a.id for a in watcher.arrivals if a.timestamp_ms < a.due_ms]
    print(
        f"\n{ROUNDS} kill -9 rounds, {sent} messages: {len(twice)} duplicated, {len(early)} early"
    )
    assert set(counts) == expected
    assert twice == {}, f"delivered more than once: {sorted(twice.items())[:20]}"
    assert early == []


def test_a_dead_letter_too_large_aborts_once_then_lands_shrunk_and_cancels_hold(
    kafka: Any, tmp_path: Path, make_settings: MakeSettings
) -> None:
    # The dead-letter topic refuses a bad record as too large: the transaction that
    # carries it is doomed and aborted; the record is remembered and, read again, goes
    # out without its value (DESIGN §2: loses nothing it can keep). A cancel in the same
    # batch holds across the abort: its victim is never delivered.
    topics = Topics(
        delay=kafka.create_topic("delay"),
        targets=[kafka.create_topic("orders")],
        dead_letter=kafka.create_topic("dlt", config={"max.message.bytes": "2048"}),
        cancels=kafka.create_topic("cancels"),
    )
    settings = make_settings(
        kafka={"instance_id": "eos-dlt"},
        delay_topics=[topics.delay],
        dead_letter_topic=topics.dead_letter,
        cancel_topic=topics.cancels,
        delivery={"exactly_once": True},
    )
    side = SubprocessSidecar(settings, tmp_path)
    side.start()
    side.wait_log("assigned", 60)
    bootstrap = kafka.bootstrap_servers
    orders = topics.targets[0]
    watcher = Watcher(bootstrap, [orders, topics.dead_letter])
    due = now_ms() + 3_000
    big = os.urandom(8_000)  # incompressible: lz4 cannot bring it under 2048 bytes
    produce(
        bootstrap,
        topics.delay,
        [
            (b"k", b"victim", native(orders, "victim", ("deliver-at-ms", str(due)))),
            (b"victim", b"cancel", [("delay-cancel", "victim")]),
            (b"bad", big, [("delay-target-topic", orders), ("delay-ms", "--5")]),
            (b"k", b"keep", native(orders, "keep", ("deliver-at-ms", str(due)))),
        ],
    )

    def landed(_: object) -> bool:
        alive(side)
        dead = any(a.topic == topics.dead_letter for a in watcher.arrivals)
        return dead and "keep" in watcher.ids(orders)

    watcher.until(landed, 90, "'keep' delivered and the dead letter written")
    watcher.settle(3.0)
    alive(side)
    assert "transaction aborted" in side.log.read_text(errors="replace")
    assert watcher.ids(orders) == ["keep"], "the cancelled message was delivered, or twice"
    dead = [a for a in watcher.arrivals if a.topic == topics.dead_letter]
    assert [(a.key, a.headers["delay-error"]) for a in dead] == [(b"bad", "bad-time")]
    assert not dead[0].value, "the dead letter should have gone out without its value"
    assert side.terminate(30) == 0
    watcher.close()
