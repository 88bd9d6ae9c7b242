"""What happened since the last metrics refresh: one tally that every part adds to.

Ingest, delivery, the cancel paths, the transactions and flow control all count into
the same :class:`Tally` (they get it at construction), and the telemetry adds what
the stores counted in their stats; it drains the tally once per refresh (:meth:`Tally.drain`)
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
    rolled: int = 0
    """Long delays the stores re-entered into their wheel's window."""
    store_corrupt: Counter[str] = field(default_factory=Counter)
    """Stored records that failed their CRC when read, by readable (``"true"``,
    ``"false"``)."""
    backpressure_pauses: int = 0
    """Times flow control paused ingest."""
    transactions_committed: int = 0
    """Exactly-once mode: transactions committed."""
    transactions_aborted: int = 0
    """Exactly-once mode: transactions aborted."""
    lateness_ms: list[int] = field(default_factory=list)
    """``produce time - due time`` of every delivered record."""

    def drain(self) -> Tally:
        """The counts so far; this tally starts again from zero."""
        taken = copy.copy(self)
        fresh = Tally()
        for f in fields(self):
            setattr(self, f.name, getattr(fresh, f.name))
        return taken
