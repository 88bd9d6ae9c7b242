"""The partition life cycle's restore hook: plan on assign, a slice per turn, resume.

1. **assign** (:meth:`RestoreHook.begin`): the delay topic's changelog is ensured
   (created with the delay topic's partition count, or checked); :func:`restorer.plan`
   decides; a stale local copy (rule 3) is set aside as ``<store>.stale`` (the one
   before it is deleted) and a fresh store opened; the partition is *restoring*, its
   delay-topic partition assigned paused;
2. **every turn** (:meth:`RestoreHook.step`): one slice of every restore;
3. **restored**: the partition turns *active*: its delay-topic partition is read from
   the group's committed offset (committed only behind changelog acks, so nothing
   stored is missing; schedules at offsets the changelog already named are skipped by
   ingest) and resumed unless ingest is paused;
4. a store whose checkpoint says some values were not acknowledged (mark
   ``changelog_unacked``, a crash) writes those of them still pending again, once it is
   active (``seeding.reseed``).

A partition revoked while restoring keeps what its store took so far (its checkpoint
names the changelog offset reached) and resumes there if it comes back.
"""

from __future__ import annotations

import logging
import shutil
import time

from confluent_kafka import TopicPartition

from delaybridge.bridge.flow import FlowControl
from delaybridge.bridge.partition.state import PartitionState, Role
from delaybridge.bridge.state.changelog import Changelog
from delaybridge.bridge.state.restorer import Restorer, RestoreTask, plan
from delaybridge.bridge.state.seeding import reseed, seed
from delaybridge.connectors.edge import AdminEdge, ConsumerEdge
from delaybridge.errors import KafkaError
from delaybridge.timerlog import TimerStore

log = logging.getLogger(__name__)
#: How long the first ask for a changelog partition's offsets may take before it is asked
#: again on a new changelog consumer (``Restorer.renew``); the second ask has 30 s.
FIRST_ASK_S = 10.0


class RestoreHook:
    def __init__(
        self, changelog: Changelog, restorer: Restorer, admin: AdminEdge, flow: FlowControl
    ) -> None:
        self.changelog = changelog
        self.restorer = restorer
        self.admin = admin
        self._flow = flow
        self._consumer: ConsumerEdge | None = None
        self._reported: dict[tuple[str, int], int] = {}
        self._finished: list[RestoreTask] = []

    def progress(self) -> list[tuple[PartitionState, int, int]]:
        """(partition, records left, records read since the last call) of every restore
        running or finished since the last call: the metrics' view."""
        out = []
        for task in self.restorer.tasks.values():
            out.append((task.part, task.remaining, self._read_since(task)))
        for task in self._finished:
            out.append((task.part, 0, self._read_since(task)))
            self._reported.pop(task.part.key, None)
        self._finished = []
        return out

    def _read_since(self, task: RestoreTask) -> int:
        before = self._reported.get(task.part.key, 0)
        self._reported[task.part.key] = task.restored
        return task.restored - before

    def begin(self, part: PartitionState, consumer: ConsumerEdge) -> bool:
        """Plan ``part``'s restore (step 1); True when it must restore before delivering."""
        self._consumer = consumer
        topic = self.changelog.topics.ensure(self.admin, consumer, part.topic)
        marks = part.store.marks
        if marks.changelog_seeding:  # a seed that did not finish: its local copy is the truth
            seed(self.changelog, part)
            return False
        try:
            task = plan(part, self.restorer.consumer, topic, FIRST_ASK_S)
        except KafkaError as exc:
            log.warning("%s: %s; asking again on a new changelog consumer", part.name, exc)
            self.restorer.renew()
            task = plan(part, self.restorer.consumer, topic)
        if task is None:
            if marks.changelog is None and part.store.stats().pending:
                seed(self.changelog, part)
            else:
                reseed(self.changelog, part)
            return False
        if task.rebuild and (part.store.stats().pending or part.store.last_source_offset >= 0):
            set_aside(part)
        part.role = Role.RESTORING
        self.restorer.start(task)
        return True

    def step(self, max_records: int) -> list[RestoreTask]:
        """One slice of every restore (step 2); activates the finished (step 3)."""
        finished = self.restorer.step(max_records)
        for task in finished:
            self._activate(task)
        self._finished += finished
        return finished

    def forget(self, part: PartitionState) -> None:
        self.restorer.stop(part.key)
        self.changelog.forget(part)

    def _activate(self, task: RestoreTask) -> None:
        part = task.part
        part.role = Role.ACTIVE
        if not task.rebuild:  # a catch-up: what the crash left unacknowledged goes again
            reseed(self.changelog, part)
        took = time.monotonic() - task.started_s
        log.info(
            "restored %s: %d changelog records in %.2f s (%.0f/s), %d pending; resuming at %d",
            part.name,
            task.restored,
            took,
            task.restored / max(took, 1e-6),
            part.store.stats().pending,
            part.offsets.commit_position(),
        )
        if self._consumer is None:
            return
        tp = TopicPartition(part.topic, part.partition, part.offsets.commit_position())
        self._consumer.seek(tp)
        if not self._flow.ingest_paused:
            self._consumer.resume([tp])


def set_aside(part: PartitionState) -> None:
    """Replace a local copy the changelog supersedes with a fresh, empty store."""
    store = part.store
    directory, settings, clock = store.directory, store.settings, store.clock
    store.close()
    stale = directory.with_name(directory.name + ".stale")
    if stale.exists():
        shutil.rmtree(stale)
    directory.rename(stale)
    log.warning(
        "%s: the local store is older than its changelog; kept as %s, restoring from Kafka",
        part.name,
        stale,
    )
    part.replace_store(TimerStore.open(directory, settings, clock))
