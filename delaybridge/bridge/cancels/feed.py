"""The cancel feed: every sidecar reads the whole cancel topic (see ``bridge/cancels/requests.py``).

No group membership: the feed assigns every partition of the cancel topic itself and
never commits to Kafka. Its position is this replica's own, kept next to its stores:

1. at start, it resumes from the position saved in ``<data_dir>/cancel-feed.json``, so
   a replica that was down for any length of time reads every cancel it missed; on a
   first start (no file) it starts ``keep_recent_ms`` back in time;
2. a saved position older than what the topic still retains is moved to the oldest
   record, with a warning (cancels older than the topic's retention are gone);
3. :meth:`CancelFeed.save` writes the position after the stores the cancels were
   applied to were flushed (the service's checkpoint), so a crash re-reads, never skips.

The feed also reads the cancel horizon topic (``horizon.py``, ``own_horizons.py``) from
its beginning (it is compacted: one record per owner), and hands each owner's word to the
:class:`CancelHorizon`, which takes it once this feed has read the cancels it vouches for
(:meth:`CancelFeed.position`).

Cancels read in the last ``keep_recent_ms`` are kept (:attr:`CancelFeed.recent`) for
stores opened later (a partition moving in). That window must cover the time a
partition can spend without a live owner: when its owner dies, the group notices one
session timeout later, and only then does another replica take the partition over; a
cancel published in between matched nothing anywhere. So the service keeps
``cancel_grace_ms + 2 * kafka.session_timeout_ms`` (one session timeout to notice, up
to one more for the rebalance); with only the grace, a grace shorter than the session
timeout lost such cancels. One owner thread.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition

from delaybridge.bridge.cancels.horizon import CancelHorizon
from delaybridge.bridge.cancels.ledger import apply_cancels
from delaybridge.bridge.cancels.own_horizons import parse_word
from delaybridge.bridge.cancels.requests import CancelRequest, UnreadableCancel, parse_origin
from delaybridge.bridge.observe.tally import Tally
from delaybridge.bridge.partition.state import PartitionState
from delaybridge.connectors.edge import ConsumerEdge
from delaybridge.connectors.errors import is_fatal
from delaybridge.connectors.retry import while_electing
from delaybridge.durable import is_no_space, write_atomic
from delaybridge.errors import KafkaError
from delaybridge.timerlog.replace_waits import ReplaceWaits, WaitingReplace

log = logging.getLogger(__name__)
#: Unreadable cancel-topic records logged one by one, then only counted.
_LOGGED_UNREADABLE = 100
POSITION_FILE = "cancel-feed.json"


class CancelFeed:
    """Reads the cancel topic; one owner thread (the service loop)."""

    def __init__(
        self,
        consumer: ConsumerEdge,
        topic: str,
        keep_recent_ms: int,
        tally: Tally,
        data_dir: Path | None = None,
        position_file: str = POSITION_FILE,
        grace_ms: int | None = None,
        horizon: CancelHorizon | None = None,
        horizon_topic: str | None = None,
        new_consumer: Callable[[], ConsumerEdge] | None = None,
    ) -> None:
        """``consumer``: an assign-only consumer (it never joins a group);
        ``keep_recent_ms``: how long read cancels stay in :attr:`recent` (see the module
        docstring); ``data_dir``: where the position is kept (None: not kept, always
        start ``keep_recent_ms`` back); ``position_file``: its name there (each worker
        process of one ``delaybridge run`` keeps its own: ``bridge/workers/identity.py``);
        ``grace_ms``: how long a replace waits (default ``keep_recent_ms``);
        ``horizon``, ``horizon_topic``: the cancel horizon and its topic (None: the rule
        is off); ``new_consumer``: makes another consumer like ``consumer``, for
        :meth:`renew`."""
        self._new_consumer = new_consumer
        self._horizon_parts: list[int] = []
        self._horizon = horizon
        self._horizon_topic = horizon_topic if horizon is not None else None
        self._tally = tally
        self._position_file = None if data_dir is None else data_dir / position_file
        self._next: dict[int, int] = {}
        self._saved: dict[int, int] = {}
        self._rewind_to: dict[int, int] = {}
        self._topic = topic
        self._keep_ms = keep_recent_ms
        self._consumer = consumer
        self.recent: deque[tuple[int, CancelRequest]] = deque()
        """Cancels (not replaces: :attr:`waits`) read in the last ``keep_recent_ms``."""
        self.waits = ReplaceWaits(keep_recent_ms if grace_ms is None else grace_ms, keep_recent_ms)
        self._marks: deque[tuple[int, dict[int, int]]] = deque()
        """(read at, partition -> first offset) of the replaces read, per poll."""
        self._replay_below: dict[int, int] = {}
        self._held: list[CancelRequest] = []
        self._saved_replay: dict[int, int] = {}
        self._unreadable = 0
        self.applied_here: Callable[[CancelRequest], bool] = _never
        """Was this request applied here already (``CancelLedger.applied_here``)? Its
        replace waits already (:meth:`wait_here`)."""

    def start(self, now_ms: int, timeout_s: float) -> None:
        """Assign every partition of the cancel topic, from the saved position on (or
        ``now - keep_recent_ms`` on a first start)."""
        deadline = time.monotonic() + timeout_s
        while True:  # a topic created a moment ago may not show its partitions yet
            metadata = self._consumer.list_topics(self._topic, timeout=timeout_s)
            topic = metadata.topics.get(self._topic)
            if topic is not None and topic.error is None and topic.partitions:
                break
            if time.monotonic() >= deadline:
                why = topic.error if topic is not None else "not in the metadata"
                raise KafkaError(f"cancel topic {self._topic!r} is not usable: {why}")
            time.sleep(0.2)
        saved, replay = self._load()
        fresh = [p for p in topic.partitions if p not in saved]
        starts = {
            p: self._start_of(p, min(saved[p], replay.get(p, saved[p])), timeout_s)
            for p in topic.partitions
            if p in saved
        }
        self._replay_below = {p: saved[p] for p in starts if starts[p] < saved[p]}
        if fresh:
            wanted = [TopicPartition(self._topic, p, now_ms - self._keep_ms) for p in fresh]
            found = while_electing(
                lambda: self._consumer.offsets_for_times(wanted, timeout=timeout_s),
                f"offsets of cancel topic {self._topic!r}",
            )
            for tp in found:  # no record at or after that time: start at the end
                starts[tp.partition] = tp.offset if tp.offset >= 0 else self._end(tp, timeout_s)
        assignment = [TopicPartition(self._topic, p, o) for p, o in starts.items()]
        self._consumer.assign(assignment + self._horizon_partitions(timeout_s))
        self._saved, self._saved_replay = dict(saved), dict(replay)
        self._next = starts | self._replay_below  # saved at the first checkpoint
        self._rewind_to = dict(self._next)
        if saved:
            log.info("cancel feed resumes at %s (saved position)", dict(sorted(starts.items())))
        self._catch_up(now_ms, time.monotonic() + timeout_s)

    def _horizon_partitions(self, timeout_s: float) -> list[TopicPartition]:
        """Every partition of the horizon topic, from its beginning (it is compacted)."""
        if self._horizon_topic is None:
            return []
        metadata = self._consumer.list_topics(self._horizon_topic, timeout=timeout_s)
        topic = metadata.topics.get(self._horizon_topic)
        if topic is None or topic.error is not None:
            raise KafkaError(f"cancel horizon topic {self._horizon_topic!r} is not usable")
        self._horizon_parts = sorted(topic.partitions)
        return [TopicPartition(self._horizon_topic, p, OFFSET_BEGINNING) for p in topic.partitions]

    def renew(self) -> None:
        """Read on with a new consumer: the cancel topic from where this one stands, the
        horizon topic from its beginning (compacted: a few records per owner; a word
        taken again changes nothing, a horizon only moves forward). A librdkafka
        consumer that lived through a broker frozen for longer than its request
        timeouts was seen to read nothing more afterwards (``feed_watch.py``)."""
        if self._new_consumer is None:
            return
        try:
            self._consumer.close()
        except KafkaException as exc:  # it is stuck, or closed already
            log.debug("closing the cancel feed's consumer: %s", exc)
        self._consumer = self._new_consumer()
        cancels = [TopicPartition(self._topic, p, o) for p, o in sorted(self._next.items())]
        words = [
            TopicPartition(self._horizon_topic, p, OFFSET_BEGINNING)
            for p in self._horizon_parts
            if self._horizon_topic is not None
        ]
        self._consumer.assign(cancels + words)

    def partitions(self) -> list[int]:
        """The cancel topic's partitions this feed reads."""
        return sorted(self._next)

    def position(self, partition: int) -> int:
        """The next offset this feed reads on partition ``partition`` of the cancel topic:
        past the records it read, and past what its consumer skipped (transaction
        markers, aborted records), which a read_committed end counts."""
        read = self._next.get(partition, 0)
        try:
            (at,) = self._consumer.position([TopicPartition(self._topic, partition)])
        except (KafkaException, ValueError):
            return read
        return max(read, at.offset)

    def _start_of(self, partition: int, saved: int, timeout_s: float) -> int:
        """The saved offset, or the oldest retained one if the saved one is gone."""
        tp = TopicPartition(self._topic, partition)
        low, _high = while_electing(
            lambda: self._consumer.get_watermark_offsets(tp, timeout=timeout_s),
            f"offsets of cancel topic {self._topic!r}",
        )
        if saved < low:
            log.warning(
                "cancel topic %s/%d: saved position %d is older than the oldest record "
                "kept (%d): cancels in between are gone (retention)",
                self._topic,
                partition,
                saved,
                low,
            )
            return low
        return saved

    def _end(self, tp: TopicPartition, timeout_s: float) -> int:
        _low, high = while_electing(
            lambda: self._consumer.get_watermark_offsets(tp, timeout=timeout_s),
            f"offsets of cancel topic {self._topic!r}",
        )
        return high

    def _load(self) -> tuple[dict[int, int], dict[int, int]]:
        """The saved (next offsets, replay_from), by partition."""
        path = self._position_file
        if path is None or not path.exists():
            return {}, {}
        try:
            doc = orjson.loads(path.read_bytes())
            if doc.get("topic") != self._topic:
                log.warning(
                    "%s is for topic %r, not %r: ignored", path, doc.get("topic"), self._topic
                )
                return {}, {}
            replay = doc.get("replay_from", {})  # absent: written before replaces waited here
            return (
                {int(p): int(o) for p, o in doc["next_offsets"].items()},
                {int(p): int(o) for p, o in replay.items()},
            )
        except (
            OSError,
            orjson.JSONDecodeError,
            KeyError,
            TypeError,
            ValueError,
            AttributeError,
        ) as exc:
            log.warning("%s unreadable (%s): starting %d ms back", path, exc, self._keep_ms)
            return {}, {}

    def rewind(self) -> None:
        """Read again from the last saved position (exactly-once mode: the cancels
        applied since went into an aborted transaction)."""
        for partition, offset in self._rewind_to.items():
            self._consumer.seek(TopicPartition(self._topic, partition, offset))
        self._next = dict(self._rewind_to)

    def save(self) -> None:
        """Persist the position (call after the stores the cancels went to are flushed)."""
        self._rewind_to = self._rewind_to | self._next
        path = self._position_file
        replay: dict[int, int] = {}
        for _, firsts in self._marks:
            for p, o in firsts.items():
                replay[p] = min(replay.get(p, o), o)
        if path is None or (self._next, replay) == (self._saved, self._saved_replay):
            return
        position = self._saved | self._next
        doc = {
            "topic": self._topic,
            "next_offsets": {str(p): o for p, o in position.items()},
            "replay_from": {str(p): o for p, o in replay.items()},
        }
        try:
            write_atomic(path, orjson.dumps(doc))
        except OSError as exc:
            if not is_no_space(exc):
                raise
            log.warning(
                "%s not saved, no room (%s): the feed re-reads from the last one if it restarts",
                path,
                exc,
            )
            return
        self._saved, self._saved_replay = position, replay

    def poll(self, now_ms: int, max_records: int = 10_000) -> list[CancelRequest]:
        """The cancels and replaces read; replaces also go into :attr:`waits`. Records
        read again below the saved position (a restart's replay): replaces go into
        :attr:`waits` only, cancels are skipped (both were applied before)."""
        out, self._held = self._held, []
        return out + self._read(self._consumer.consume(max_records, timeout=0), now_ms)

    def _catch_up(self, now_ms: int, deadline: float) -> None:
        """Read the replay before anything is ingested, so the waits are back before an
        older copy can arrive; what is read beyond it waits for the first poll."""
        behind = dict(self._replay_below)
        idle = 0  # the last records before the saved position may be invisible (markers)
        while behind and time.monotonic() < deadline and idle < 5:
            msgs = self._consumer.consume(10_000, timeout=0.2)
            idle = 0 if msgs else idle + 1
            self._held += self._read(msgs, now_ms)
            at = self._consumer.position([TopicPartition(self._topic, p) for p in behind])
            for tp in at:
                if tp.offset >= behind[tp.partition]:
                    del behind[tp.partition]
        if behind:
            log.warning(
                "cancel feed: replaces before %s not read again by the start's "
                "deadline: read with the feed from now on",
                behind,
            )

    def _read(self, msgs: list[Any], now_ms: int) -> list[CancelRequest]:
        out: list[CancelRequest] = []
        firsts: dict[int, int] = {}
        horizon = self._horizon
        for msg in msgs:
            err = msg.error()
            if err is not None:
                if is_fatal(err):
                    raise RuntimeError(f"cancel topic {self._topic!r}: {err.str()}")
                continue
            if horizon is not None and msg.topic() == self._horizon_topic:
                word = parse_word(msg.value())
                for key, remote in word.horizons.items():
                    horizon.remote(key, remote)
                horizon.demand(msg.key() or b"", word.busy, now_ms)
                continue
            p, o = msg.partition() or 0, msg.offset() or 0
            replay = o < self._replay_below.get(p, -1)
            if not replay:
                self._next[p] = o + 1
            raw = msg.value()
            try:
                request = CancelRequest.decode(raw if raw is not None else b"")
            except UnreadableCancel as exc:
                if not replay:
                    self._unreadable_one(msg, exc)
                continue
            if request.replace and request.target_topic and request.sent_ms is not None:
                if replay or not self.applied_here(request):
                    self._wait(request, now_ms, replay)
                firsts.setdefault(p, o)
            elif not replay:
                self.recent.append((now_ms, request))
            if not replay:
                out.append(request)
        if firsts:
            self._marks.append((now_ms, firsts))
        if horizon is not None and msgs:
            horizon.recheck()  # the words this read of the cancel topic now covers
        self.waits.drop(now_ms)
        while self._marks and self._marks[0][0] < now_ms - self._keep_ms:
            self._marks.popleft()
        while self.recent and self.recent[0][0] < now_ms - self._keep_ms:
            self.recent.popleft()
        return out

    def wait_here(self, requests: list[CancelRequest], now_ms: int) -> None:
        """This process publishes ``requests`` and applies them to its stores now
        (``CancelLedger.apply_here``): its replaces wait from now, not from when they
        are read back, so that an older copy stored in between is taken as it arrives.
        Read back, they are not added again."""
        for request in requests:
            if request.replace and request.target_topic and request.sent_ms is not None:
                self._wait(request, now_ms, False)

    def _wait(self, request: CancelRequest, now_ms: int, replay: bool) -> None:
        assert request.target_topic is not None and request.sent_ms is not None
        origin, offset = parse_origin(request.origin)
        self.waits.add(
            request.id, request.target_topic, request.sent_ms, origin, offset, now_ms, replay
        )

    def _unreadable_one(self, msg: Any, exc: UnreadableCancel) -> None:
        self._unreadable += 1
        self._tally.cancels_unreadable += 1
        if self._unreadable <= _LOGGED_UNREADABLE:
            log.warning(
                "cancel topic %s/%s/%s: unreadable cancel skipped (%s)%s",
                msg.topic(),
                msg.partition(),
                msg.offset(),
                exc,
                "" if self._unreadable < _LOGGED_UNREADABLE else "; not logging more",
            )

    def open_store(self, part: PartitionState, now_ms: int) -> None:
        """A store opened now (at start, or a partition moving in): it waits on the
        shared replaces, and what was read in the last ``keep_recent_ms`` applies to it
        at once (what it holds already) -- the replaces then wait their grace in it."""
        part.store.share_replace_waits(self.waits, (part.topic, part.partition))
        requests = [req for _, req in self.recent]
        requests += [_as_request(w) for w in self.waits.recent(now_ms)]
        if requests:
            apply_cancels([part], requests)

    def close(self) -> None:
        self._consumer.close()


def _never(request: CancelRequest) -> bool:
    return False


def _as_request(w: WaitingReplace) -> CancelRequest:
    origin = "" if w.origin is None else f"{w.origin[0]}/{w.origin[1]}/"
    return CancelRequest(
        w.id, w.topic, origin + ("" if w.offset is None else str(w.offset)), w.sent_ms, True
    )
