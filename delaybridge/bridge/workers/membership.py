"""A replica's place in its consumer group: a stable static member by default.

**Why static by default.** A dynamic member that loses its session (Kafka unreachable
for longer than ``kafka.session_timeout_ms``) comes back under a new member id, and the
group coordinator waits for the old id to expire before it hands out the partitions
again: delivery resumed 44 s after Kafka returned. A static member
(``group.instance.id``, KIP-345) that comes back replaces its old self at once (0.3 s
measured), and a restart (a rolling update) does not move its partitions at all. So an
empty ``kafka.instance_id`` now means "static, with an id kept in the data directory"
(``member-id``, as the transactional id is kept in ``transactional-id``): stable across
restarts of the replica, unique because every replica has its own volume. The chart
sets the pod's name instead; ``kafka.static_membership: false`` keeps dynamic
membership.

**Members a smaller pod no longer has.** A static member never leaves the group on its
own: closed, its partitions wait for its session to expire (45 s by default). Worker
``i`` of a pod is ``<id>-w<i>``, so a pod restarted with fewer workers would leave the
partitions of its missing workers unowned that long. The ids a pod used are kept in the
data directory (``members.json``); at start, each id it no longer uses is *retired*: a
consumer joins as that member, which replaces the old one at once and takes its
partitions, then closes with the shortest session the broker allows
(``group.min.session.timeout.ms``, 6 s by default), after which the group gives the
partitions to the members that exist. (Kafka's admin API removes a static member
outright, but librdkafka does not offer it.)

**The transactional id keeps its origin.** Exactly-once mode derived it from the
configured instance id, or from ``transactional-id``; it is settled before the
generated member id fills the instance id, so an upgrade keeps the id that fences the
previous process's open transaction.
"""

from __future__ import annotations

import logging
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
from confluent_kafka import TopicPartition

from delaybridge.bridge.commit.transactions import transactional_id
from delaybridge.bridge.tuning import suffix
from delaybridge.connectors import KafkaClients
from delaybridge.connectors.edge import ConsumerEdge
from delaybridge.durable import write_atomic
from delaybridge.settings import Settings

log = logging.getLogger(__name__)
MEMBER_ID_FILE = "member-id"
MEMBERS_FILE = "members.json"
#: The session of a retiring member: Kafka's default group.min.session.timeout.ms.
RETIRE_SESSION_MS = 6_000
#: How long a retiring member waits to join before it gives up (the old one then
#: expires with its own session, as it would have without the retirement).
RETIRE_JOIN_S = 20.0


def identify(settings: Settings) -> Settings:
    """``settings`` with the replica's static member id (and, in exactly-once mode, its
    transactional id) settled, as the module docstring says."""
    kafka = settings.kafka
    delivery = settings.delivery
    data_dir = settings.store.data_dir
    if delivery.exactly_once and not delivery.transactional_id:
        tid = transactional_id("", kafka.group_id, kafka.instance_id, data_dir)
        delivery = delivery.model_copy(update={"transactional_id": tid})
    if not kafka.instance_id and kafka.static_membership:
        kafka = kafka.model_copy(update={"instance_id": _kept_member_id(kafka.group_id, data_dir)})
    return settings.model_copy(update={"kafka": kafka, "delivery": delivery})


def _kept_member_id(group_id: str, data_dir: Path) -> str:
    path = data_dir / MEMBER_ID_FILE
    try:
        kept = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        kept = ""
    if not kept:
        kept = f"{group_id}-{uuid.uuid4().hex[:16]}"
        data_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(path, kept.encode())
        log.info("static group member id %s, kept in %s", kept, path)
    return kept


def member_ids(settings: Settings, workers: int) -> list[str]:
    """The static member ids of a pod with ``workers`` worker processes."""
    base = settings.kafka.instance_id
    if not base:
        return []
    return [base + suffix(i) for i in range(workers)]


def retire_stale(settings: Settings, workers: int, clients: Any = None) -> list[str]:
    """Retire the static members this pod used before and does not now (the module
    docstring); returns their ids. ``clients``: a Kafka client factory (tests)."""
    current = member_ids(settings, workers)
    path = settings.store.data_dir / MEMBERS_FILE
    previous: list[str] = []
    try:
        doc = orjson.loads(path.read_bytes())
        if isinstance(doc, list):
            previous = [str(m) for m in doc]
    except (OSError, orjson.JSONDecodeError) as exc:
        if not isinstance(exc, FileNotFoundError):
            log.warning("%s unreadable (%s): no member to retire", path, exc)
    stale = [m for m in previous if m not in current]
    factory = clients or KafkaClients(settings.kafka)
    for member in stale:
        _retire(factory, settings, member)
    if current != previous:
        settings.store.data_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(path, orjson.dumps(current))
    return stale


def _retire(clients: Any, settings: Settings, member: str) -> None:
    log.info(
        "retiring static member %s (this pod runs fewer workers now): its partitions "
        "move to the others within ~%d s instead of a whole session timeout",
        member,
        RETIRE_SESSION_MS // 1000,
    )
    joined: list[TopicPartition] = []

    def on_assign(consumer: ConsumerEdge, parts: list[TopicPartition]) -> None:
        joined.extend(parts)
        consumer.incremental_assign(parts)
        consumer.pause(parts)  # it only takes them over; it reads nothing

    consumer: ConsumerEdge = clients.consumer(
        {
            "group.instance.id": member,
            "session.timeout.ms": RETIRE_SESSION_MS,
            "heartbeat.interval.ms": 1_000,
        }
    )
    try:
        consumer.subscribe(settings.subscription(), on_assign=on_assign)
        deadline = time.monotonic() + RETIRE_JOIN_S
        while not joined and time.monotonic() < deadline:
            consumer.consume(1, timeout=0.2)
        if not joined:
            log.warning(
                "could not retire %s within %.0f s: it expires with its own session",
                member,
                RETIRE_JOIN_S,
            )
    finally:
        consumer.close()
