"""Seeding a changelog: every pending message of a store that predates it, written once;
and after a crash, the values that were not acknowledged (:func:`reseed`).

A store from before its changelog (an upgrade, or the changelog turned on later) would
not be restorable: :func:`seed` writes each of its pending messages as a value, so it
becomes so. The store is marked ``changelog_seeding`` (durably, first) until every value
is acknowledged: a crash meanwhile seeds again on the next start (the same keys and
values again: harmless) instead of taking the partly written changelog for the truth
and setting the local copy aside (``bridge/state/restore_hook.py`` reads the mark).

Not thread-safe: the service's owner thread calls it.
"""

from __future__ import annotations

import dataclasses
import logging
from functools import partial
from pathlib import Path

from delaybridge.bridge.commit.holds import Hold
from delaybridge.bridge.partition.copies import generation_of
from delaybridge.bridge.partition.state import PartitionState
from delaybridge.bridge.state.changelog import Changelog
from delaybridge.timerlog.changelog_record import key_of, value_of
from delaybridge.timerlog.commit_codec import decode
from delaybridge.timerlog.matching import Pending

log = logging.getLogger(__name__)


def seed(changelog: Changelog, part: PartitionState) -> None:
    """Write every pending message of ``part``'s store to its changelog (see above)."""
    store = part.store
    changelog.seeding(part, True)
    store.flush(dataclasses.replace(store.marks, changelog_seeding=True))
    chunks = list(store.pending_records())
    n = sum(len(raws) for raws in chunks)
    topic = changelog.topics.topic_for(part.topic)
    log.info("%s: writing its %d pending messages to changelog %s", part.name, n, topic)
    hold = Hold.unheld(n, partial(_seeded, changelog, part, topic))
    _send(changelog, part, chunks, hold, track=False)
    if not n:
        _seeded(changelog, part, topic)


def reseed(changelog: Changelog, part: PartitionState) -> None:
    """Write again the values the store's checkpoint says were not acknowledged when it
    was taken (mark ``changelog_unacked``: the lowest commit-log position of one), if
    their messages are still pending: after a crash nothing else would. Without it, a
    restart on the same disk had them in its store only, and committed its delay-topic
    offsets past them (re-read, they are skipped as stored), so a disk lost later lost
    them. The commit is held where it is until they are acknowledged; they are tracked
    like any value, so the mark stays until then (a crash meanwhile writes them again:
    the same keys and values, harmless)."""
    since = part.store.marks.changelog_unacked
    if since is None:
        return
    chunks = list(part.store.pending_records(since=since))
    n = sum(len(pending) for pending in chunks)
    log.info(
        "%s: writing again the %d changelog values of pending messages not "
        "acknowledged before the restart",
        part.name,
        n,
    )
    if not n:
        return  # the next flush clears the mark (``Changelog.marks``)
    hold = Hold.of(part.offsets, part.offsets.commit_position(), n)
    _send(changelog, part, chunks, hold, track=True)


def _send(
    changelog: Changelog,
    part: PartitionState,
    chunks: list[list[Pending]],
    hold: Hold,
    *,
    track: bool,
) -> None:
    for pending in chunks:
        for position, raw in pending:
            rec = decode(raw, 0, Path("<pending record>"))
            key = key_of(rec.source_offset, generation_of(rec))
            at = position if track else -1
            changelog.send_value(part, key, value_of(raw), hold, at)


def _seeded(changelog: Changelog, part: PartitionState, topic: str) -> None:
    changelog.seeding(part, False)  # the next flush clears the mark (``Changelog.marks``)
    log.info("%s: its changelog %s now holds every pending message", part.name, topic)
