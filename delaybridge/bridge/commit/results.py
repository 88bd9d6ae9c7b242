"""The results of the delay-topic offset commits: a refused one is sent again.

Commits are asynchronous (``Partitions.flush_and_commit``); librdkafka reports each
one's result to the consumer's ``on_commit`` callback, inside ``consume()`` on the owner
thread. A commit the broker refused — typically during a rebalance
(``REBALANCE_IN_PROGRESS``, ``ILLEGAL_GENERATION``), which several worker processes
joining one group make common — must not be forgotten: the partition's tracker has
already taken that position, so without :meth:`OffsetTracker.commit_failed` the next
flush would find nothing new to commit, and once traffic stopped the group's offset
would stay behind (a later owner re-reading records already stored).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, TopicPartition

from delaybridge.bridge.commit.point import Committable, PartKey

log = logging.getLogger(__name__)


def commit_done(
    owned: Mapping[PartKey, Committable], err: KafkaError | None, tps: list[TopicPartition]
) -> None:
    """``on_commit``: mark the owned partitions whose commit failed for another try."""
    failed = [tp for tp in tps if err is not None or tp.error is not None]
    retried = []
    for tp in failed:
        part = owned.get((tp.topic, tp.partition))
        if part is not None:  # one revoked meanwhile is its next owner's business
            part.offsets.commit_failed()
            retried.append(f"{tp.topic}/{tp.partition}@{tp.offset}")
    if retried:
        why = err.str() if err is not None else "; ".join({str(tp.error) for tp in failed})
        log.warning(
            "offset commit of %s refused (%s): sent again at the next flush",
            ", ".join(retried),
            why,
        )


class CommitResults:
    """The consumer's ``on_commit`` (:attr:`conf`), for the partitions in :attr:`owned`
    (the owned partitions, set once the service has them)."""

    def __init__(self) -> None:
        self.owned: Mapping[PartKey, Committable] = {}

    @property
    def conf(self) -> dict[str, Any]:
        return {"on_commit": self}

    def __call__(self, err: KafkaError | None, tps: list[TopicPartition]) -> None:
        commit_done(self.owned, err, tps)
