"""The commit point: when the stores are durable, and which delay-topic offsets may commit.

A consumed delay-topic record ends in one of two places: its partition's store (a
schedule) or Kafka (a cancel re-published to the cancel topic, a dead letter, a stored
message's changelog value). Its offset may be committed only once it is durable there
(DESIGN §4), and a store's checkpoint must say exactly where consumption resumes after a
crash. This package is the one place that decides both:

- every part of the loop *records* into the partition's :class:`~.offsets.OffsetTracker`:
  ingest marks offsets handled; a side write, or a run's changelog values, holds its
  offset until Kafka acknowledges it (:class:`~.holds.Hold`);
- a :class:`CommitPoint` runs the checkpoint protocol over every owned partition at the
  moments the loop and the consumer group give it: every interval (:meth:`checkpoint`),
  at shutdown (:meth:`final`), before partitions leave (:meth:`hand_over`), before new
  ones arrive (:meth:`before_assign`) and when they are lost (:meth:`lost`).

There is one implementation per delivery mode, and its numbered steps are written in its
code as they are here.

**At-least-once** (``at_least_once.py``): the store is the truth, Kafka's offsets follow it.

1. *write behind*: the changelog values held for ``changelog.write_behind_ms`` go out (at
   a handover or a shutdown, every held value of the partitions concerned);
2. *serve delivery reports*: at a handover or a shutdown, until nothing of those
   partitions is in flight (deliveries, side writes, changelog values), bounded by
   ``shutdown_grace_ms``; otherwise those that are ready;
3. *flush* each store with its marks: where consumption resumes (the tracker's position
   if everything handled so far is durable), and the changelog's (the offset the store
   covers, its oldest unacknowledged value, a seed running), after a progress record
   for warm standbys. A store the disk has no room for keeps its last checkpoint and its
   offset stays; ingest pauses (``bridge/flow.py``);
4. *commit* the delay-topic offsets the flushed stores cover: asynchronously, but
   synchronously at a handover (the next owner reads from there); a commit the broker
   refuses is sent again at the next checkpoint (``results.py``);
5. *save the cancel feed's position*, once every store its cancels went to is flushed.

**Exactly-once** (``exactly_once.py``): Kafka is the truth, the store a cache of it.

1. *write* every held changelog value and, when the transaction has other work, each
   active partition's progress record (an idle replica commits nothing);
2. *serve every delivery report* (a tombstone produced from a report is served too); a
   failed record has doomed the transaction;
3. *commit* the transaction with the delay-topic positions (everything handled, minus side
   writes not yet acknowledged) and the group's metadata — or abort it when doomed;
4. committed: *flush* each store with its marks (as step 3 above), then *save the cancel
   feed's position*;
5. aborted: the caller *restarts* every owned partition from the last commit (each store
   dropped unflushed and opened again from its last flush, which matched the last commit:
   ``bridge/ownership.py``).

So in either mode a restart after ``kill -9`` resumes at a position whose records are all
durable, and exactly-once mode never leaves on disk what no committed transaction says.

The commit point sits low in the sidecar's layers, so that everything that writes for a
partition can record into its tracker. It drives the parts above it (the partitions, the
changelog, the cancel feed, the producer) through the small protocols below. Not
thread-safe: the service's owner thread calls it.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Protocol, TypeVar

from delaybridge.bridge.commit.offsets import OffsetTracker
from delaybridge.connectors.edge import ConsumerEdge
from delaybridge.timerlog import StoreMarks, TimerStore

PartKey = tuple[str, int]


class Committable(Protocol):
    """One owned delay-topic partition, as the commit point sees it."""

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...

    @property
    def key(self) -> PartKey: ...

    @property
    def name(self) -> str: ...

    @property
    def store(self) -> TimerStore: ...

    @property
    def offsets(self) -> OffsetTracker: ...

    @property
    def in_flight(self) -> int:
        """Due records taken from the store and not yet resolved."""
        ...


P = TypeVar("P", bound=Committable)
P_in = TypeVar("P_in", bound=Committable, contravariant=True)


class Changelog(Protocol[P]):
    """The changelog's writer (``bridge/state/changelog.py``), as the steps drive it."""

    def write_behind(self, parts: list[P]) -> None: ...

    def write_all(self, parts: list[P]) -> None: ...

    def progress(self, part: P) -> None: ...

    def marks(self, part: P, marks: StoreMarks) -> StoreMarks: ...


class FeedPosition(Protocol):
    """The cancel feed (``bridge/cancels/feed.py``): its position is saved after a flush."""

    def save(self) -> None: ...


class Reports(Protocol):
    """The one producer (``bridge/produce/outbox.py``): its delivery reports."""

    @property
    def in_flight(self) -> int: ...

    def poll(self, timeout_s: float = 0.0) -> None: ...

    def flush(self, timeout_s: float) -> int: ...


class DiskFull(Protocol):
    """Flow control (``bridge/flow.py``): a flush that found no room pauses ingest."""

    def set_disk_full(self, full: bool) -> None: ...


class CommitPoint(Protocol[P_in]):
    """The checkpoint protocol of the owned partitions, one implementation per mode."""

    def checkpoint(self, consumer: ConsumerEdge) -> bool:
        """Every flush (or transaction) interval. False: the transaction was aborted,
        and the caller restarts every owned partition from the last commit."""
        ...

    def final(self, consumer: ConsumerEdge, deadline_s: float) -> bool:
        """At shutdown: everything out (waiting until ``deadline_s``, monotonic), then a
        checkpoint; False as for :meth:`checkpoint`."""
        ...

    def hand_over(self, consumer: ConsumerEdge, keys: Collection[PartKey]) -> bool:
        """Before these partitions are revoked: make them durable and commit them.
        False: not committed (a transaction aborted): drop their stores unflushed, and
        restart the others from the last commit."""
        ...

    def before_assign(self, consumer: ConsumerEdge) -> bool:
        """Before new partitions are opened (opening big stores may outlast a
        transaction); False as for :meth:`checkpoint`."""
        ...

    def lost(self) -> bool:
        """The group took partitions away without a handover; True: their stores must
        be dropped unflushed (their work must never commit) and the rest restarted.
        False: their deliveries' reports are still awaited, then :meth:`release`."""
        ...

    def release(self, part: P_in) -> None:
        """A lost partition whose deliveries' reports all came: flush its store with its
        marks (its acknowledgements are durable), commit nothing (it is not ours)."""
        ...

    @property
    def alive(self) -> bool:
        """False once nothing can ever commit again (a fenced transactional producer)."""
        ...


def select(owned: Sequence[P], keys: Collection[PartKey] | None) -> list[P]:
    """The partitions of ``owned`` named by ``keys`` (all of them for None)."""
    if keys is None:
        return list(owned)
    return [p for p in owned if p.key in keys]
