"""Warm standbys: copies of partitions this replica does not own, kept by their changelog.

Kafka Streams' ``num.standby.replicas``, for the timer stores: with
``changelog.standby_replicas = k``, every partition has up to k replicas besides its
owner that tail its changelog into a local store, so when the owner dies the partition
moves to a replica whose store needs a catch-up of seconds, not a restore of everything.

Who keeps which standby (:func:`standby_keepers`): the group's members and each
partition's owner come from describing the consumer group (every few seconds, without
blocking the loop). Members are grouped by pod (worker ``i`` of a pod joins as
``<id>-w<i>``, :func:`pod_of`), since the workers of a pod share its store directory;
for each partition the pods other than the owner's are ranked by a hash of (pod,
partition), rendezvous-style, and in each of the first k one worker, picked by a hash
of the partition, keeps it. Every replica computes the same ranking, so no coordination
is needed, and a member joining or leaving moves few standbys.

A partition assigned to a worker whose sibling keeps its standby opens the same store
directory: the new owner waits for the store's lock (``partition/state.py``,
``LOCK_WAIT_S``) until the sibling's next view of the group (``DESCRIBE_EVERY_MS``) sees
the new owner in its own pod and releases the standby, its checkpoint naming the
changelog offset reached; the owner's restore is then the catch-up from there.

A standby is a follow-mode restore task (``bridge/state/restorer.py``) into the partition's own
store directory: values appended, tombstones dropped, and, at each progress record (the
owner's delivery cursor, ``changelog.py`` rule 6), what is due up to it discarded, so
the copy holds what the owner holds and its memory and disk stay bounded. When the group
hands the partition to this replica, the standby store is closed (its checkpoint names
the changelog offset reached) and the partition is opened as usual: its restore is the
short catch-up from there (``bridge/state/restorer.py`` rule 1).

Not thread-safe: the service's owner thread calls it.
"""

from __future__ import annotations

import logging
import zlib
from concurrent.futures import Future
from typing import Any

from delaybridge.bridge.commit.offsets import OffsetTracker
from delaybridge.bridge.partition.state import PartitionState, PartKey, Role
from delaybridge.bridge.state.restore_hook import RestoreHook, set_aside
from delaybridge.bridge.state.restorer import Restorer, RestoreTask, apply, plan
from delaybridge.connectors.edge import AdminEdge, ConsumerEdge
from delaybridge.timerlog import Clock, StoreSettings, TimerStore

log = logging.getLogger(__name__)
DESCRIBE_EVERY_MS = 5_000
#: Tombstones are applied in batches this far apart: each batch scans the live timer
#: log once for their ids (until the store has an id index, issue 13).
APPLY_EVERY_MS = 10_000


def pod_of(member: str) -> str:
    """The pod a group member belongs to: worker ``i`` > 0 of a pod joins as
    ``<id>-w<i>`` and worker 0 as ``<id>`` (``bridge/workers/identity.py``), so the pod is
    the name without a ``-w<i>`` suffix. A dynamic member (no instance id) is a pod of
    its own."""
    head, sep, tail = member.rpartition("-w")
    if sep and head and tail.isdigit():
        return head
    return member


def standby_keepers(
    partitions: list[PartKey], members: list[str], owners: dict[PartKey, str], k: int
) -> dict[PartKey, list[str]]:
    """For each partition, the (up to) k members that keep a standby of it: one worker in
    each of k pods other than the owner's. Pods, not members, are ranked: the workers of
    one pod share its store directory, so a sibling of the owner must never keep a copy,
    and two siblings must not keep one each."""
    pods: dict[str, list[str]] = {}
    for member in sorted(members):
        pods.setdefault(pod_of(member), []).append(member)
    out: dict[PartKey, list[str]] = {}
    for key in partitions:
        owner = owners.get(key)
        mine = pod_of(owner) if owner is not None else None
        others = [pod for pod in pods if pod != mine]
        others.sort(key=lambda pod: zlib.crc32(f"{pod}|{key[0]}|{key[1]}".encode()))
        keepers = []
        for pod in others[:k]:
            workers = pods[pod]
            pick = zlib.crc32(f"{key[0]}|{key[1]}".encode()) % len(workers)
            keepers.append(workers[pick])
        out[key] = keepers
    return out


class GroupView:
    """The consumer group's members and who owns what, refreshed in the background."""

    def __init__(self, admin: AdminEdge, group: str, clock: Clock) -> None:
        self._admin = admin
        self._group = group
        self._clock = clock
        self._pending: Future[Any] | None = None
        self._next_ms = 0
        self.members: list[str] = []
        self.owners: dict[PartKey, str] = {}
        self.fresh = False

    def poll(self) -> bool:
        """Start a describe when due, take its answer when ready; True on a new view."""
        now = self._clock.now_ms()
        if self._pending is None:
            if now >= self._next_ms:
                describe = getattr(self._admin, "describe_consumer_groups")  # noqa: B009
                self._pending = describe([self._group], request_timeout=10)[self._group]
            return False
        if not self._pending.done():
            return False
        future, self._pending = self._pending, None
        self._next_ms = now + DESCRIBE_EVERY_MS
        try:
            description = future.result()
        except Exception as exc:  # the group describes again at the next refresh
            log.warning("describing group %s: %s", self._group, exc)
            return False
        members, owners = [], {}
        for m in description.members:
            name = m.group_instance_id or m.member_id
            members.append(name)
            for tp in m.assignment.topic_partitions:
                owners[(tp.topic, tp.partition)] = name
        self.members = sorted(members)
        self.owners = owners
        self.fresh = True
        return True


class Standbys:
    """This replica's warm standbys (see the module docstring)."""

    def __init__(
        self,
        replicas: int,
        instance_id: str,
        view: GroupView,
        restorer: Restorer,
        restoring: RestoreHook,
        store_settings: StoreSettings,
        clock: Clock,
    ) -> None:
        self._k = replicas
        self._instance_id = instance_id
        self._view = view
        self.restorer = restorer
        self._restoring = restoring
        self._store_settings = store_settings
        self._clock = clock
        self.parts: dict[PartKey, PartitionState] = {}
        self._applied_ms = clock.now_ms()

    def step(
        self, consumer: ConsumerEdge, owned: set[PartKey], data_dir: Any, max_records: int
    ) -> None:
        """Refresh who keeps what; tail the standbys' changelogs; apply them now and then."""
        if self._view.poll():
            self._rebalance(consumer, owned, data_dir)
        if not self.parts:
            return
        self.restorer.step(max_records)
        now = self._clock.now_ms()
        if now - self._applied_ms >= APPLY_EVERY_MS:
            self._applied_ms = now
            for task in self.restorer.tasks.values():
                apply(task)
                if task.progress_ms is not None:
                    discard_due(task.part.store, task.progress_ms)

    def _rebalance(self, consumer: ConsumerEdge, owned: set[PartKey], data_dir: Any) -> None:
        me = self._instance_id or _member_id(consumer)
        if not me:
            return  # not in the group yet
        topics = {key[0] for key in self._view.owners} | {key[0] for key in owned}
        every = [key for key in self._view.owners if key[0] in topics]
        keepers = standby_keepers(every, self._view.members, self._view.owners, self._k)
        wanted = {key for key, who in keepers.items() if me in who and key not in owned}
        for key in list(self.parts):
            if key not in wanted:
                self.release(key)
        for key in sorted(wanted - self.parts.keys()):
            self._open(consumer, key, data_dir)

    def _open(self, consumer: ConsumerEdge, key: PartKey, data_dir: Any) -> None:
        topic, partition = key
        store = TimerStore.open(
            data_dir / f"{topic}-{partition}", self._store_settings, self._clock
        )
        part = PartitionState(topic, partition, store, OffsetTracker(0), 0.0, role=Role.STANDBY)
        changelog = self._restoring.changelog.topics.ensure(self._restoring.admin, consumer, topic)
        task = plan(part, self.restorer.consumer, changelog)
        if task is None:  # up to date, or an empty changelog: follow from here
            start = (-1 if store.marks.changelog is None else store.marks.changelog) + 1
            task = RestoreTask(part, changelog, start, 0, held_through=store.last_source_offset)
        elif task.rebuild and (store.stats().pending or store.last_source_offset >= 0):
            set_aside(part)
        task.follow = True
        self.parts[key] = part
        self.restorer.start(task)
        log.info("standby for %s: tailing %s from offset %d", part.name, changelog, task.position)

    def release(self, key: PartKey) -> None:
        """Stop keeping ``key`` (this replica owns it now, or another keeps it)."""
        part = self.parts.pop(key, None)
        if part is None:
            return
        task = self.restorer.tasks.get(key)
        if task is not None:
            apply(task)
        self.restorer.stop(key)
        part.close()
        log.info("standby for %s released", part.name)

    def lag(self) -> list[tuple[PartitionState, int]]:
        """(standby, changelog records it has not read) for the metrics."""
        out = []
        for key, part in self.parts.items():
            task = self.restorer.tasks.get(key)
            if task is not None:
                out.append((part, self.restorer.lag(task)))
        return out

    def close(self) -> None:
        for key in list(self.parts):
            self.release(key)
        self.restorer.close()


def _member_id(consumer: ConsumerEdge) -> str:
    memberid = getattr(consumer, "memberid", None)
    return str(memberid() or "") if memberid is not None else ""


def discard_due(store: TimerStore, until_ms: int, batch: int = 50_000) -> int:
    """Drop what is due up to ``until_ms`` from a standby's copy: its owner delivered it
    (or moved it on), which the owner's progress record says. Returns how many."""
    dropped = 0
    while True:
        taken = store.reader.take_due(batch, until_ms)
        if not taken:
            return dropped
        store.mark_delivered(taken[-1].cursor)
        dropped += len(taken)
