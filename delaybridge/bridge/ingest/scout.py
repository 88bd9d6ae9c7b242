"""Reading cancels while ingest waits: the cancel horizon must not stop with ingest.

Ingest pauses for several reasons: an operator's ``pause enqueue``, backpressure, a full
disk, a partition restoring from its changelog. Its schedules can wait (Kafka keeps
them), but a cancel in a paused partition would then wait too, and the cancel horizon
(``bridge/cancels/horizon.py``) would hold delivery back for every partition until its
bound. So while a partition of this process does not ingest, the :class:`CancelScout`
reads it on a consumer of its own (assign-only, no group, read_committed), from where
ingest stands, and publishes its cancels and its schedules' replaces to the cancel topic
— nothing else: schedules are not stored, bad input is not dead-lettered, no offset is
committed. When ingest resumes, it reads those records again and publishes the same
cancels again (harmless: a cancel applied twice takes nothing the second time). The
scout's position counts as read for the partition's horizon (``own_horizons.py``).

Not thread-safe: the service's owner thread calls it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from confluent_kafka import KafkaException, Message, TopicPartition

from delaybridge.bridge.cancels.own_horizons import OwnHorizons
from delaybridge.bridge.cancels.prefix import PrefixChecks
from delaybridge.bridge.cancels.requests import CancelRequest
from delaybridge.bridge.ingest.ingestor import cancel_request
from delaybridge.bridge.partition.state import PartKey
from delaybridge.bridge.produce.resend import Resender, Write
from delaybridge.connectors.edge import ConsumerEdge
from delaybridge.contract.classify import ingest_batch
from delaybridge.contract.decisions import Cancel
from delaybridge.contract.rules import HeaderRules
from delaybridge.timerlog import Clock

log = logging.getLogger(__name__)
#: Records read per step: the scout reads a paused partition's backlog in slices.
SCOUT_BATCH = 2_000


class CancelScout:
    """Publishes the cancels of partitions that do not ingest (see the module docstring)."""

    def __init__(
        self,
        consumer: ConsumerEdge,
        rules: HeaderRules,
        resender: Resender,
        cancel_topic: str,
        horizons: OwnHorizons,
        clock: Clock,
        apply_here: Callable[[list[CancelRequest]], None],
        checks: PrefixChecks | None = None,
    ) -> None:
        """``apply_here``: applies the cancels read to this process's stores at once,
        as ingest does (``ingestor.py``); ``checks``: where a prefix cancel is counted
        against the cap first (over it, it is left alone: ingest dead-letters it when it
        reads it)."""
        self._checks = checks
        self._apply_here = apply_here
        self._consumer = consumer
        self._rules = rules
        self._resender = resender
        self._cancel_topic = cancel_topic
        self._horizons = horizons
        self._clock = clock
        self._positions: dict[PartKey, int] = {}
        self._requests: list[CancelRequest] = []

    def positions(self) -> dict[PartKey, int]:
        """Where the scout stands on each partition it reads (next offset)."""
        return dict(self._positions)

    def step(self, waiting: Mapping[PartKey, int]) -> None:
        """Read a slice of the partitions that do not ingest now (``waiting``: where
        ingest stands on each), and publish their cancels."""
        if set(waiting) != set(self._positions):
            self._reassign(waiting)
        if not self._positions:
            return
        msgs = self._consumer.consume(SCOUT_BATCH, timeout=0)
        if not msgs:
            return
        now_ms = self._clock.now_ms()
        plan = ingest_batch(msgs, self._rules, now_ms, partial(_all_new, self._positions))
        for key, run in plan.runs.items():
            records, run_msgs, replaces = run
            replacing = set(map(id, replaces))
            for rec, msg in zip(records, run_msgs, strict=True):
                if id(msg) in replacing:
                    self._publish(key, msg, Cancel(rec.id, rec.target_topic), replace=True)
        for key, writes in plan.later.items():
            for msg, decision in writes:
                if not isinstance(decision, Cancel):
                    continue
                if decision.prefix and self._checks is not None:
                    self._check_prefix(key, msg, decision, self._checks)
                else:
                    self._publish(key, msg, decision)
        if self._requests:
            requests, self._requests = self._requests, []
            self._apply_here(requests)
        for msg in msgs:
            if msg.error() is None:
                key = (msg.topic() or "", msg.partition() or 0)
                if key in self._positions:
                    offset: Any = msg.offset()
                    self._positions[key] = max(self._positions[key], int(offset) + 1)

    def _check_prefix(
        self, key: PartKey, msg: Message, cancel: Cancel, checks: PrefixChecks
    ) -> None:
        """Published and applied once counted under the cap (``bridge/cancels/prefix.py``);
        meanwhile the partition's horizon stays at the record (``PrefixChecks.held``)."""

        def decide(count: int) -> None:
            if count <= checks.cap:
                self._publish(key, msg, cancel)
                requests, self._requests = self._requests, []
                self._apply_here(requests)

        offset: Any = msg.offset()
        request = cancel_request(msg, cancel)
        checks.start(key, int(offset), request, decide, None, lambda: key in self._positions)

    def close(self) -> None:
        self._consumer.close()

    def _reassign(self, waiting: Mapping[PartKey, int]) -> None:
        gone = set(self._positions) - set(waiting)
        for key in gone:
            del self._positions[key]
        for key, position in waiting.items():
            if key not in self._positions:
                self._positions[key] = max(position, 0)
                log.info(
                    "%s/%d does not ingest now: reading its cancels from offset %d",
                    key[0],
                    key[1],
                    position,
                )
        tps = [TopicPartition(t, p, o) for (t, p), o in self._positions.items()]
        try:
            self._consumer.assign(tps)
        except KafkaException as exc:
            log.warning("cancel scout cannot assign %s: %s", tps, exc)

    def _publish(
        self, key: PartKey, msg: Message, cancel: Cancel, *, replace: bool = False
    ) -> None:
        offset: Any = msg.offset()
        self._horizons.cancel_written(key, int(offset), msg.timestamp()[1])
        request = cancel_request(msg, cancel, replace)
        self._requests.append(request)
        self._resender.send(
            Write(
                f"{key[0]}/{key[1]}/{offset} (read while its ingest waits)",
                self._cancel_topic,
                request.encode(),
                cancel.id.encode(),
                None,
                on_ack=partial(self._horizons.cancel_acked, key, int(offset)),
            )
        )


def _all_new(positions: Mapping[PartKey, int], key: PartKey) -> int | None:
    """Every record of a scouted partition is new to the scout; others are skipped."""
    return -1 if key in positions else None
