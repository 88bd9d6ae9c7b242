"""The admin control: what the HTTP thread may ask of the running sidecar.

:class:`AdminControl` implements the :class:`~delaybridge.bridge.admin.control.Control`
protocol. The stores, the producer and the consumer belong to the service's owner thread,
so every call that touches them is queued (:class:`CommandQueue`) and run between loop
turns (step 1 of the turn); the HTTP thread waits for the answer up to
``CONTROL_TIMEOUT_S`` and then answers 503 instead of hanging.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from functools import partial
from typing import Any, TypeVar

from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka import Message

from delaybridge.bridge.admin import pending
from delaybridge.bridge.admin.control import ConfirmRequired, ControlTimeout
from delaybridge.bridge.admin.status import partition_stats, record_json
from delaybridge.bridge.cancels import prefix as prefixes
from delaybridge.bridge.cancels.ledger import CancelLedger
from delaybridge.bridge.cancels.requests import CancelRequest
from delaybridge.bridge.flow import Direction, FlowControl
from delaybridge.bridge.ownership import Partitions
from delaybridge.bridge.produce.outbox import Outbox
from delaybridge.connectors.reachability import KafkaReachability
from delaybridge.timerlog import Clock

log = logging.getLogger(__name__)
ADMIN_KEY = ("admin-api", -1)
"""Where an admin API prefix cancel is read from: no partition (its horizon holds none)."""
T = TypeVar("T")
CONTROL_TIMEOUT_S = 10.0
#: The loop is unhealthy when its last turn started longer ago than this.
HEARTBEAT_LIMIT_S = 60.0


class CommandQueue:
    """Calls handed from other threads to the owner thread, answered between turns."""

    def __init__(self) -> None:
        self._queue: queue.Queue[tuple[Callable[[], Any], Future[Any]]] = queue.Queue()
        self._owner: threading.Thread | None = None

    def start(self) -> None:
        """The calling thread is the owner from now on: calls from others are queued."""
        self._owner = threading.current_thread()

    def stop(self) -> None:
        """The owner stopped answering: calls run inline again."""
        self._owner = None

    def inline(self) -> bool:
        """Would :meth:`call` run inline here (no owner yet, or the owner calls)?"""
        return self._owner is None or threading.current_thread() is self._owner

    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the owner thread and return its result (inline when there is
        no owner yet, or when the owner itself calls)."""
        if self.inline():
            return fn()
        future: Future[T] = Future()
        self._queue.put((fn, future))
        try:
            return future.result(timeout=CONTROL_TIMEOUT_S)
        except FutureTimeout as exc:
            raise ControlTimeout(
                f"the service loop did not answer in {CONTROL_TIMEOUT_S} s"
            ) from exc

    def run_pending(self) -> None:
        """Run every queued call (owner thread); exceptions go back to the caller."""
        while True:
            try:
                fn, future = self._queue.get_nowait()
            except queue.Empty:
                return
            try:
                future.set_result(fn())
            except Exception as exc:  # handed to the HTTP thread, which reports it
                future.set_exception(exc)


class AdminControl:
    """The sidecar's :class:`~delaybridge.bridge.admin.control.Control` (see module docstring)."""

    def __init__(
        self,
        group_id: str,
        cancel_topic: str,
        partitions: Partitions,
        ledger: CancelLedger,
        outbox: Outbox,
        flow: FlowControl,
        clock: Clock,
        reachability: KafkaReachability,
        checks: prefixes.PrefixChecks,
    ) -> None:
        """``checks``: where a bulk cancel by prefix is counted against their cap
        (``cancels.prefix_confirm_above``)."""
        self.commands = CommandQueue()
        self._checks = checks
        self._confirm_above = checks.cap
        self._group_id = group_id
        self._cancel_topic = cancel_topic
        self._partitions = partitions
        self._ledger = ledger
        self._outbox = outbox
        self._flow = flow
        self._clock = clock
        self._reachability = reachability
        self._heartbeat_s = time.monotonic()
        self.started = False
        self.failure: str | None = None
        """Why the sidecar cannot go on (a fatal Kafka client error); None while fine."""

    def beat(self) -> None:
        """The loop is alive (called at the start of every turn)."""
        self._heartbeat_s = time.monotonic()

    def fail(self, why: str) -> None:
        """Something the sidecar cannot recover from in-process: report unhealthy, so
        the orchestrator restarts the pod (``/healthz`` answers 503 from now on)."""
        if self.failure is None:
            self.failure = why

    def healthy(self) -> bool:
        if self.failure is not None:
            return False
        return time.monotonic() - self._heartbeat_s < HEARTBEAT_LIMIT_S

    def ready(self) -> tuple[bool, str]:
        if not self.started:
            return False, "starting"
        # First: with Kafka away, the group cannot assign anything either.
        kafka_away = self._reachability.readiness()
        if kafka_away is not None:
            return False, kafka_away
        if not self._partitions.rebalanced:
            return False, "waiting for the consumer group to assign partitions"
        restoring = self._partitions.restoring
        if restoring is not None and restoring.restorer.tasks:
            left = ", ".join(
                f"{t.part.name} {t.remaining} records left"
                for t in list(restoring.restorer.tasks.values())
            )
            return False, f"restoring from the changelog: {left}"
        return True, ""

    def conditions(self) -> dict[str, str]:
        # Read without the owner thread: the note is one string, replaced whole.
        note = self._flow.disk.note
        return {"disk": note} if note else {}

    def stats(self) -> dict[str, Any]:
        def snapshot() -> dict[str, Any]:
            return {
                "group": self._group_id,
                "paused": sorted(d.value for d in self._flow.paused),
                "backpressure": self._flow.backpressure,
                "disk_pause": self._flow.disk.paused,
                "in_flight": self._outbox.in_flight,
                "partitions": [partition_stats(p) for p in self._partitions],
            }

        return self.commands.call(snapshot)

    def lookup(self, id: str, values: bool = False) -> dict[str, Any] | None:
        def find() -> dict[str, Any] | None:
            for part in self._partitions:
                found = part.store.lookup(id)
                if found is not None:
                    return record_json(part, found, values)
            return None

        return self.commands.call(find)

    def cancel(self, id: str, target_topic: str | None) -> dict[str, Any]:
        def do() -> dict[str, Any]:
            request = CancelRequest(id, target_topic, "admin-api")
            (matched,) = self._ledger.apply(self._partitions, [request], self._clock.now_ms())
            return {
                "id": id,
                "target_topic": target_topic,
                "published": self._publish(request, f"admin cancel of {id!r}"),
                "matched_here": matched,
            }

        return self.commands.call(do)

    def cancel_prefix(
        self, prefix: str, target_topic: str | None, confirm: int | None, dry_run: bool = False
    ) -> dict[str, Any]:
        """Counted a step per loop turn (``bridge/cancels/prefix.py``), then decided on
        the owner thread; this thread waits for the answer (up to the control timeout)."""
        answer: Future[dict[str, Any]] = Future()

        def decide(request: CancelRequest, count: int) -> None:
            if dry_run:
                doc = {"id_prefix": prefix, "count": count, "dry_run": True}
                answer.set_result(doc | {"confirm_above": self._confirm_above})
                return
            if count > self._confirm_above and (confirm is None or confirm < count):
                answer.set_exception(ConfirmRequired(count, self._confirm_above))
                return
            self._ledger.apply(self._partitions, [request], self._clock.now_ms())
            queued = self._publish(request, f"admin cancel of prefix {prefix!r}")
            doc = {"id_prefix": prefix, "target_topic": target_topic, "count": count}
            answer.set_result(doc | {"published": queued})

        def start() -> None:
            now_ms = self._clock.now_ms()  # sent now: it takes what was sent before
            request = CancelRequest(prefix, target_topic, "admin-api", now_ms, prefix=True)
            decided = partial(decide, request)
            self._checks.start(ADMIN_KEY, -1, request, decided, None, _always, whole=True)

        self.commands.call(start)
        if self.commands.inline():  # no loop turns for us: count to the end here
            while not answer.done():
                self._checks.step()
        try:
            return answer.result(timeout=CONTROL_TIMEOUT_S)
        except FutureTimeout as exc:
            raise ControlTimeout(
                f"the count of prefix {prefix!r} did not end in {CONTROL_TIMEOUT_S} s"
            ) from exc

    def _publish(self, request: CancelRequest, what: str) -> str:
        """Queue ``request`` to the cancel topic (never awaited: the owner thread must
        not block on the broker here); what the answer says of it."""
        topic = self._cancel_topic

        def on_delivery(err: RdKafkaError | None, _msg: Message | None) -> None:
            if err is not None:
                log.error("%s not published to %r: %s", what, topic, err.str())

        queued = self._outbox.send(topic, request.encode(), request.id.encode(), None, on_delivery)
        return "queued" if queued else "not queued: producer queue full"

    def list_pending(self, query: pending.PendingQuery) -> dict[str, Any]:
        return self.commands.call(lambda: pending.list_replica(self._partitions, query))

    def pending_stats(self, start_ms: int | None) -> dict[str, Any]:
        def do() -> dict[str, Any]:
            start = self._clock.now_ms() if start_ms is None else start_ms
            return pending.stats_replica(self._partitions, start)

        return self.commands.call(do)

    def pause(self, what: Direction) -> None:
        self.commands.call(lambda: self._flow.set_paused(what, True))

    def resume(self, what: Direction) -> None:
        self.commands.call(lambda: self._flow.set_paused(what, False))

    def paused(self) -> set[Direction]:
        return set(self._flow.paused)


def _always() -> bool:
    return True
