"""Running real sidecars against the session's Kafka, in-process or as a subprocess."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import Consumer, Message, Producer

from delaybridge.bridge.service import Service
from delaybridge.connectors import header_text
from delaybridge.settings import Settings, load
from tests.support import overlay, wait_until


@dataclass
class Topics:
    delay: str
    targets: list[str]
    dead_letter: str
    cancels: str


def settings_for(
    bootstrap: str, topics: Topics, data_dir: Path, group: str, **overrides: Any
) -> Settings:
    base: dict[str, Any] = {
        "kafka": {"bootstrap_servers": bootstrap, "group_id": group, "session_timeout_ms": 10_000},
        "delay_topics": [topics.delay],
        "dead_letter_topic": topics.dead_letter,
        "cancel_topic": topics.cancels,
        "store": {"data_dir": str(data_dir), "tick_ms": 100, "flush_interval_ms": 100},
        "http": {"port": 0},
        "shutdown_grace_ms": 10_000,
    }
    return load(None, **overlay(base, overrides))


@dataclass
class InProcessSidecar:
    """A Service on a thread of this process; stop() drains it like SIGTERM would."""

    service: Service
    thread: threading.Thread
    errors: list[BaseException] = field(default_factory=list)

    @classmethod
    def start(cls, settings: Settings, timeout_s: float = 60) -> InProcessSidecar:
        service = Service(settings)
        holder: list[BaseException] = []

        def run() -> None:
            try:
                service.run()
            except BaseException as exc:  # reported by stop() and wait_ready()
                holder.append(exc)

        thread = threading.Thread(target=run, name="sidecar", daemon=True)
        thread.start()
        sidecar = cls(service, thread, holder)
        sidecar.wait_for(lambda: service.control.ready()[0], timeout_s, "sidecar ready")
        return sidecar

    def wait_for(self, condition: Callable[[], bool], timeout_s: float, what: str) -> None:
        def alive_and() -> bool:
            if self.errors:
                raise AssertionError(f"sidecar died: {self.errors[0]!r}") from self.errors[0]
            return condition()

        wait_until(alive_and, timeout_s, what, interval_s=0.02)

    def __enter__(self) -> InProcessSidecar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self, timeout_s: float = 30) -> None:
        self.service.stop()
        self.thread.join(timeout_s)
        assert not self.thread.is_alive(), "sidecar did not stop within its grace period"
        if self.errors:
            raise AssertionError(f"sidecar failed: {self.errors[0]!r}") from self.errors[0]


_ASSIGNED = re.compile(r"assigned (\S+): store recovered")
_RELEASED = re.compile(r"released (\S+)$")


class SubprocessSidecar:
    """``delaybridge run`` as a child process: for kill -9 and SIGTERM tests."""

    def __init__(self, settings: Settings, work: Path, name: str = "sidecar") -> None:
        self.config = work / f"{name}.yaml"
        doc = settings.model_dump(mode="json")
        self.config.write_text(yaml.safe_dump(doc))
        self.log = work / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at = 0  # the log's size when the current process started

    def start(self) -> None:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.started_at = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "delaybridge", "run", "--config", str(self.config)],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # its own process group: the pod, for kill9()
            )

    def wait_log(self, text: str, timeout_s: float) -> None:
        def logged() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"sidecar exited {self.proc.returncode}:\n{self.tail()}")
            return text in self.log.read_text(errors="replace")

        wait_until(logged, timeout_s, f"{text!r} in the sidecar log", detail=self.tail)

    def owned(self) -> set[str]:
        """The partitions this process holds now, from its "assigned"/"released" log lines."""
        held: set[str] = set()
        for line in self.log.read_text(errors="replace").splitlines():
            if (found := _ASSIGNED.search(line)) is not None:
                held.add(found.group(1))
            elif (found := _RELEASED.search(line)) is not None:
                held.discard(found.group(1))
        return held

    def kill9(self) -> None:
        """SIGKILL to the whole pod: the supervisor and its worker processes (a worker
        whose supervisor alone died gets SIGTERM and drains: no crash at all)."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def terminate(self, timeout_s: float) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout_s)

    def tail(self, n: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])


@dataclass(frozen=True)
class Arrival:
    topic: str
    partition: int
    key: bytes | None
    value: bytes | None
    headers: dict[str, str]
    timestamp_ms: int

    @property
    def id(self) -> str:
        return self.headers.get("delay-id", "")

    @property
    def due_ms(self) -> int:
        return int(self.headers["delay-due-ms"])


class Watcher:
    """Reads target topics from the beginning and collects arrivals."""

    def __init__(self, bootstrap: str, topics: list[str]) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"watch-{time.time_ns()}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            }
        )
        self.consumer.subscribe(topics)
        self.arrivals: list[Arrival] = []

    def poll(self, timeout_s: float = 0.1) -> None:
        for msg in self.consumer.consume(10_000, timeout=timeout_s):
            if msg.error():
                continue
            self.arrivals.append(_arrival(msg))

    def until(
        self, condition: Callable[[list[Arrival]], bool], timeout_s: float, what: str
    ) -> None:
        def arrived() -> bool:
            self.poll()
            return condition(self.arrivals)

        def have() -> str:
            ids = sorted({a.id for a in self.arrivals})[:20]
            return f"have {len(self.arrivals)} arrivals, ids {ids}"

        wait_until(arrived, timeout_s, what, interval_s=0, detail=have)

    def settle(self, quiet_s: float) -> None:
        """Keep reading until nothing new arrives for ``quiet_s`` (to catch extras)."""
        end = time.monotonic() + quiet_s
        while time.monotonic() < end:
            before = len(self.arrivals)
            self.poll(0.1)
            if len(self.arrivals) != before:
                end = time.monotonic() + quiet_s

    def ids(self, topic: str | None = None) -> list[str]:
        return [a.id for a in self.arrivals if topic is None or a.topic == topic]

    def close(self) -> None:
        self.consumer.close()


def _arrival(msg: Message) -> Arrival:
    topic, partition = msg.topic(), msg.partition()
    assert topic is not None and partition is not None
    return Arrival(topic, partition, msg.key(), msg.value(), header_text(msg), msg.timestamp()[1])


def produce(
    bootstrap: str,
    topic: str,
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, str | bytes | None]]]],
    partition: int | None = None,
) -> list[int]:
    """Produce and wait for acks; returns the offsets in order."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
    )
    offsets: list[int] = [-1] * len(records)
    errors: list[str] = []

    def cb(i: int) -> Callable[[Any, Any], None]:
        def on_delivery(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(err.str())
            else:
                offsets[i] = msg.offset()

        return on_delivery

    for i, (key, value, headers) in enumerate(records):
        kwargs: dict[str, Any] = {} if partition is None else {"partition": partition}
        producer.produce(topic, value, key, headers=headers, on_delivery=cb(i), **kwargs)
        producer.poll(0)
    assert producer.flush(30) == 0, "produce not acknowledged within 30 s"
    assert not errors, errors
    return offsets


def now_ms() -> int:
    return int(time.time() * 1000)


def iter_chunks(n: int, size: int) -> Iterator[range]:
    for start in range(0, n, size):
        yield range(start, min(n, start + size))


def native(target: str, id: str, *timing: tuple[str, str]) -> list[tuple[str, str | bytes | None]]:
    """Native headers for one delayed message: target, timing header(s), delay-id."""
    return [("delay-target-topic", target), *timing, ("delay-id", id)]


def send(
    bootstrap: str,
    topic: str,
    headers: list[tuple[str, str | bytes | None]],
    *,
    key: bytes | None = b"k",
    value: bytes | None = b"v",
    partition: int | None = None,
) -> int:
    """Produce one record and wait for its ack; returns its offset."""
    (offset,) = produce(bootstrap, topic, [(key, value, headers)], partition)
    return offset
