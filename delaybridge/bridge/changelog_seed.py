"""Seeding a changelog: every pending message of a store that predates it, written once.

A store from before its changelog (an upgrade, or the changelog turned on later) would
not be restorable: :func:`seed` writes each of its pending messages as a value, so it
becomes so. The store is marked ``changelog_seeding`` (durably, first) until every value
is acknowledged: a crash meanwhile seeds again on the next start (the same keys and
values again: harmless) instead of taking the partly written changelog for the truth
and setting the local copy aside (``bridge/restoring.py`` reads the mark).

Not thread-safe: the service's owner thread calls it.
"""

from __future__ import annotations

import logging
from functools import partial
from pathlib import Path

from delaybridge.bridge.attempts import generation_of
from delaybridge.bridge.changelog import SEEDING_MARK, Changelog
from delaybridge.bridge.held_values import Gate
from delaybridge.bridge.partition import PartitionState
from delaybridge.timerlog.changelog_codec import key_of, value_of
from delaybridge.timerlog.commit_codec import decode

log = logging.getLogger(__name__)


def seed(changelog: Changelog, part: PartitionState) -> None:
    """Write every pending message of ``part``'s store to its changelog (see above)."""
    store = part.store
    store.marks[SEEDING_MARK] = 1
    store.flush()
    chunks = list(store.pending_records())
    n = sum(len(raws) for raws in chunks)
    topic = changelog.topics.topic_for(part.topic)
    log.info("%s: writing its %d pending messages to changelog %s", part.name, n, topic)
    gate = Gate(part, -1, n, partial(_seeded, part, topic))
    for raws in chunks:
        for raw in raws:
            rec = decode(raw, 0, Path("<pending record>"))
            key = key_of(rec.source_offset, generation_of(rec))
            changelog.send_value(part, topic, key, value_of(raw), gate)
    if not n:
        _seeded(part, topic)


def _seeded(part: PartitionState, topic: str) -> None:
    part.store.marks.pop(SEEDING_MARK, None)
    log.info("%s: its changelog %s now holds every pending message", part.name, topic)
