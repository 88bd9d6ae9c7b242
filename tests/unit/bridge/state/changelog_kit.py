"""What the changelog tests on the fakes share: its topic, its records, the ids pending."""

from __future__ import annotations

from confluent_kafka import Message

from delaybridge.timerlog.changelog_record import PROGRESS_KEY
from tests.unit.bridge.sidecar_kit import FakeSidecar

CHANGELOG = "delaybridge-delay-changelog"


def changelog(side: FakeSidecar) -> list[Message]:
    """The changelog's message records (progress records left out)."""
    return [m for m in side.cluster.records(CHANGELOG) if m.key() != PROGRESS_KEY]


def pending_ids(side: FakeSidecar) -> set[str]:
    """Ids of every pending message, read through the admin look-up (one per id)."""
    found = set()
    for part in side.service.partitions:
        for i in range(200):
            for prefix in ("later", "soon"):
                rec = part.store.lookup(f"{prefix}{i}")
                if rec is not None:
                    found.add(rec.id)
    return found
