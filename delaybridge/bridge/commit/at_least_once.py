"""The commit point of at-least-once mode: flush the stores, then commit what they cover.

The steps (numbered as in ``point.py``, and below in :meth:`AtLeastOnce._run`):

1. write behind: the changelog values held long enough go out (all of them at a handover
   or a shutdown);
2. serve delivery reports (at a handover or a shutdown: until nothing of the partitions is
   in flight, bounded by the grace);
3. flush each store with its marks (after a progress record for warm standbys);
4. commit the delay-topic offsets the flushed stores cover (synchronously at a handover);
5. save the cancel feed's position, once every store is flushed.

A crash anywhere in between is harmless: a flush makes the store's data and its marks
durable together, and the group's offset only ever follows a flush, so a restart resumes
no later than the first record not durable (re-reading a few is harmless: schedules
already stored are skipped, cancels and dead letters are written again).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Collection, Mapping
from typing import Generic

from confluent_kafka import KafkaException, TopicPartition

from delaybridge.bridge.commit.point import (
    Changelog,
    DiskFull,
    FeedPosition,
    P,
    PartKey,
    Reports,
    select,
)
from delaybridge.connectors.edge import ConsumerEdge
from delaybridge.durable import NO_SPACE

log = logging.getLogger(__name__)


class AtLeastOnce(Generic[P]):
    """The commit point of at-least-once mode (see the module docstring)."""

    def __init__(
        self,
        owned: Mapping[PartKey, P],
        reports: Reports,
        flow: DiskFull,
        grace_s: float,
        changelog: Changelog[P] | None = None,
        feed: FeedPosition | None = None,
    ) -> None:
        """``owned``: the owned partitions by key (kept up to date by their owner);
        ``grace_s``: how long a handover waits for in-flight records."""
        self._owned = owned
        self._reports = reports
        self._flow = flow
        self._grace_s = grace_s
        self._changelog = changelog
        self._feed = feed

    @property
    def alive(self) -> bool:
        return True

    def checkpoint(self, consumer: ConsumerEdge) -> bool:
        self._run(consumer, None, deadline_s=None, sync=False, save_feed=True)
        return True

    def final(self, consumer: ConsumerEdge, deadline_s: float) -> bool:
        self._run(consumer, None, deadline_s=deadline_s, sync=False, save_feed=True)
        return True

    def hand_over(self, consumer: ConsumerEdge, keys: Collection[PartKey]) -> bool:
        deadline_s = time.monotonic() + self._grace_s
        self._run(consumer, keys, deadline_s=deadline_s, sync=True, save_feed=False)
        return True

    def before_assign(self, consumer: ConsumerEdge) -> bool:
        return True  # nothing is open that a new partition could disturb

    def lost(self) -> bool:
        return False  # their reports still count: a lost session is not a crash

    def release(self, part: P) -> None:
        flush(part, self._changelog, self._flow)  # 3, and never 4: not ours to commit

    def _run(
        self,
        consumer: ConsumerEdge,
        keys: Collection[PartKey] | None,
        *,
        deadline_s: float | None,
        sync: bool,
        save_feed: bool,
    ) -> None:
        """The steps for the partitions named by ``keys`` (all: None). ``deadline_s``:
        everything goes out and is waited for until then (a handover, a shutdown)."""
        parts = select(list(self._owned.values()), keys)
        changelog = self._changelog
        if changelog is not None:  # 1
            if deadline_s is None:
                changelog.write_behind(parts)
            else:
                changelog.write_all(parts)
        if deadline_s is None:  # 2
            self._reports.poll(0)
        else:
            self._drain(keys, deadline_s)
            if keys is None:
                self._reports.flush(deadline_s - time.monotonic())
        commits = []
        flushed = True
        for part in select(list(self._owned.values()), keys):  # 3
            if changelog is not None:
                changelog.progress(part)
            if not flush(part, changelog, self._flow):
                flushed = False
                continue
            position = part.offsets.take_commit()
            if position is not None:
                commits.append(TopicPartition(part.topic, part.partition, position))
        if commits:  # 4
            self._commit(consumer, commits, sync)
        if save_feed and flushed and self._feed is not None:  # 5
            self._feed.save()

    def _drain(self, keys: Collection[PartKey] | None, deadline_s: float) -> None:
        """Step 2 at a handover or shutdown: serve delivery reports until these
        partitions have nothing in flight (deliveries, side writes, changelog values),
        or until ``deadline_s``."""

        def busy() -> bool:
            parts = select(list(self._owned.values()), keys)
            return any(part.in_flight or part.offsets.unacked for part in parts)

        while busy() and time.monotonic() < deadline_s:
            self._reports.poll(0.05)

    def _commit(self, consumer: ConsumerEdge, commits: list[TopicPartition], sync: bool) -> None:
        """Step 4; a refused asynchronous commit is reported to ``results.py``."""
        try:
            if sync:
                consumer.commit(offsets=commits, asynchronous=False)
            else:
                consumer.commit(offsets=commits)
        except KafkaException as exc:
            log.warning("offset commit failed (retried at the next flush): %s", exc)


def flush(part: P, changelog: Changelog[P] | None, flow: DiskFull) -> bool:
    """Flush ``part``'s store with its marks (step 3; exactly-once mode's step 4): where
    consumption resumes if everything handled so far is durable, and the changelog's
    own; then let its tracker know. False when there is no space: the store keeps its
    last checkpoint, its offset stays where that left it, ingest pauses (flow control);
    the next checkpoint tries again."""
    marks = dataclasses.replace(part.store.marks, source_resume=part.offsets.position_after_flush())
    if changelog is not None:
        marks = changelog.marks(part, marks)
    try:
        part.store.flush(marks)
    except OSError as exc:
        if exc.errno not in NO_SPACE:
            raise
        log.warning("%s: cannot flush, no space left (%s)", part.name, exc)
        flow.set_disk_full(True)
        return False
    part.offsets.store_flushed()
    return True
