"""The owner's marks: positions a store saves in its checkpoint with the data they describe.

A store does not know Kafka. Its owner (the sidecar) needs a few positions to be exactly
as durable as the store's own data — where to resume reading the delay topic, which
changelog offset the store covers — so it hands them to :meth:`TimerStore.flush
<delaybridge.timerlog.store.TimerStore.flush>`, which writes them in the same atomic
checkpoint as the log positions. After a crash the owner reads back the marks of the last
flush (:attr:`TimerStore.marks`), never newer ones and never older ones.

On disk they are the checkpoint's ``marks`` object (``timerlog/checkpoint.py``): only the
marks that are set, in the order of the fields below, ``changelog_seeding`` as ``1``. A
checkpoint naming a mark this build does not know was written by a newer build: it is
refused by name rather than silently dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, fields


class UnknownMark(ValueError):
    """A checkpoint names a mark this build does not know (written by a newer build)."""


@dataclass(frozen=True, slots=True)
class StoreMarks:
    """The owner's positions as of a flush; None (or False): never set."""

    source_resume: int | None = None
    """The delay-topic offset where consumption resumes after a restart: the lowest
    offset not durable at the flush (schedules stored, cancels and dead letters
    acknowledged). Written by the sidecar's commit point (``bridge/commit/``)."""
    source_seen: int | None = None
    """The highest delay-topic offset any changelog record named, as of a restore:
    ingest skips schedules at or below it (``bridge/state/restorer.py``)."""
    changelog: int | None = None
    """The changelog offset the store covers: a restart catches up from the next one."""
    changelog_unacked: int | None = None
    """The lowest commit-log position of a value the changelog had not acknowledged:
    a restart writes the values still pending from there again (``reseed``)."""
    changelog_seeding: bool = False
    """The store's pending messages are being written to a new changelog: until that
    finishes, the local copy is the truth, not the partly written changelog."""

    def to_json(self) -> dict[str, int]:
        """The marks that are set, in field order (the checkpoint's ``marks`` object)."""
        out: dict[str, int] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None or value is False:
                continue
            out[f.name] = int(value)
        return out

    @classmethod
    def from_json(cls, doc: object) -> StoreMarks:
        """Inverse of :meth:`to_json`; UnknownMark names a mark this build cannot keep,
        TypeError a value that is not an integer."""
        if not isinstance(doc, dict):
            raise TypeError(f"marks: expected a JSON object, found {type(doc).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(doc) - known)
        if unknown:
            raise UnknownMark(f"marks {', '.join(unknown)} unknown to this build (a newer one)")
        values = dict(doc)
        for name, value in values.items():
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"mark {name!r} is {value!r}, not an integer")
        seeding = bool(values.pop("changelog_seeding", 0))
        return cls(**values, changelog_seeding=seeding)


NO_MARKS = StoreMarks()
"""A store that was never flushed by an owner."""
