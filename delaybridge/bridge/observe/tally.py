"""What happened since the last metrics refresh: one tally that every part adds to.

Ingest, delivery and the cancel paths all count into the same :class:`Tally` (they get
it at construction); the telemetry drains it once per refresh (:meth:`Tally.drain`)
and hands the counts to the Prometheus metrics. One drain protocol for every counter
source, so a counter cannot be counted and then forgotten on the way to ``/metrics``.

Not thread-safe: the service's owner thread adds and drains.
"""

from __future__ import annotations

import copy
from collections import Counter
from dataclasses import dataclass, field, fields

from delaybridge.contract.reasons import Reason


@dataclass
class Tally:
    """Counts since the last :meth:`drain`."""

    enqueued: Counter[str] = field(default_factory=Counter)
    """Records stored, by delay topic."""
    delivered: Counter[str] = field(default_factory=Counter)
    """Records acknowledged by the target, by target topic."""
    dead_lettered: Counter[Reason] = field(default_factory=Counter)
    """Records acknowledged by the dead-letter topic, by reason."""
    retries: Counter[Reason] = field(default_factory=Counter)
    """Delivery attempts scheduled again after a retryable failure, by reason."""
    cancels_published: int = 0
    """Cancels read from a delay topic and re-published to the cancel topic."""
    cancels_unreadable: int = 0
    """Records on the cancel topic that were not cancels (skipped)."""
    cancelled: int = 0
    """Pending messages removed by a cancel."""
    replaced: int = 0
    """Pending messages a later schedule with the same id replaced."""
    cancel_unknown: int = 0
    """Cancels that matched no pending message in this sidecar's stores."""
    early: int = 0
    """Records a store handed out before their due time (held back; must stay 0)."""
    lateness_ms: list[int] = field(default_factory=list)
    """``produce time - due time`` of every delivered record."""

    def drain(self) -> Tally:
        """The counts so far; this tally starts again from zero."""
        taken = copy.copy(self)
        fresh = Tally()
        for f in fields(self):
            setattr(self, f.name, getattr(fresh, f.name))
        return taken
