"""The sidecar's counters, each declared once, and what the loop counted since the last refresh.

Every counter is one field of :class:`Tally`, declared with :func:`counted`: the field's
metadata carries the Prometheus counter it is exported as (name, help text, label), so
the metric, the field the loop adds to and the export step all come from that one
declaration. :class:`~delaybridge.bridge.observe.metrics.Metrics` builds one Prometheus
counter per declared field (:func:`declarations`).

Ingest, delivery, the cancel paths, the transactions and flow control count into the
same tally (they get it at construction), and the telemetry adds what the stores
counted in their own stats (rolls, corrupt records); once per refresh the telemetry
drains it (:meth:`Tally.drain`) and hands the counts to ``Metrics.count``. One drain
protocol for every counter source, so a counter cannot be counted and then forgotten
on the way to ``/metrics``.

A field without a label is an ``int``; a field with a label is a
``collections.Counter`` keyed by the label's value (a topic name, or a
:class:`~delaybridge.contract.reasons.Reason`, whose ``str`` is its code). The hot paths
add to it with a plain attribute and dict operation, no function call: ingest once per
stored batch (``tally.enqueued[topic] += n``), delivery once per delivery report
(``tally.delivered[topic]``).

Adding a counter is adding a field here: the metric follows. Renaming a field's metric
breaks the chart's dashboard and alert rules (tests/unit/monitoring/ says which);
docs/operations.md lists the metrics.

Not thread-safe: the service's owner thread adds and drains.
"""

from __future__ import annotations

import copy
from collections import Counter
from dataclasses import dataclass, field, fields
from typing import Any, overload

from delaybridge.bridge.observe.labels import DELAY_TOPIC, TARGET_TOPIC, Label
from delaybridge.contract.reasons import SIDECAR_REASONS, Reason

_DECLARATION = "counter"
"""The key of a declared field's metadata that holds its :class:`CounterDeclaration`."""


@dataclass(frozen=True, slots=True)
class CounterDeclaration:
    """The Prometheus counter a :class:`Tally` field is exported as."""

    name: str
    """The metric's name without ``_total`` (the exposition adds it)."""
    help: str
    label: Label | None = None
    """The counter's one label, or None: the field is then a plain ``int``."""


@overload
def counted(name: str, help: str) -> int: ...


@overload
def counted(name: str, help: str, label: Label) -> Counter[Any]: ...


def counted(name: str, help: str, label: Label | None = None) -> Any:
    """A :class:`Tally` field exported as the counter ``name``: an ``int`` starting at 0,
    or with a ``label``, a ``collections.Counter`` by label value.

    Like :func:`dataclasses.field`, it returns the field's specification; the overloads
    give the type the field holds, so mypy checks the field's annotation against it."""
    metadata = {_DECLARATION: CounterDeclaration(name, help, label)}
    if label is None:
        return field(default=0, metadata=metadata)
    return field(default_factory=Counter, metadata=metadata)


@dataclass
class Tally:
    """Counts since the last :meth:`drain`; the fields are in the order ``/metrics`` lists them."""

    enqueued: Counter[str] = counted(
        "delaybridge_enqueued",
        "Records accepted into a store.",
        DELAY_TOPIC,
    )
    delivered: Counter[str] = counted(
        "delaybridge_delivered",
        "Messages delivered (acked by the broker).",
        TARGET_TOPIC,
    )
    cancelled: int = counted(
        "delaybridge_cancelled",
        "Pending messages removed by a cancel.",
    )
    replaced: int = counted(
        "delaybridge_replaced",
        "Pending messages replaced by a later schedule with the same id and target topic.",
    )
    cancel_unknown: int = counted(
        "delaybridge_cancel_unknown",
        "Cancels naming an id that no store holds (already delivered, or never sent).",
    )
    dead_lettered: Counter[Reason] = counted(
        "delaybridge_dead_lettered",
        "Records sent to the dead-letter topic.",
        # Every code visible at 0 from the first scrape: an alert on a reason's rate
        # then has a series before the first record of that reason arrives.
        Label("reason", values=tuple(reason.value for reason in SIDECAR_REASONS)),
    )
    rolled: int = counted(
        "delaybridge_rolled",
        "Long delays re-entered into the wheel's window.",
    )
    retries: Counter[Reason] = counted(
        "delaybridge_delivery_retries",
        "Delivery attempts retried with backoff.",
        Label("reason"),
    )
    early: int = counted(
        "delaybridge_early_deliveries",
        "Records handed out or delivered before their due time. Must stay 0; counted "
        "so an alert can fire (the sidecar holds such a record back, never sends it).",
    )
    cancels_unreadable: int = counted(
        "delaybridge_cancels_unreadable",
        "Records on the cancel topic that are not cancels (skipped and logged).",
    )
    cancels_published: int = counted(
        "delaybridge_cancels_published",
        "Cancels read from a delay topic and re-published to the cancel topic.",
    )
    backpressure_pauses: int = counted(
        "delaybridge_backpressure_pauses",
        "Times ingest paused itself because the store or delivery backlog hit its limit.",
    )
    disk_pauses: int = counted(
        "delaybridge_disk_pauses",
        "Times ingest paused for want of disk space (free space under "
        "store.min_free_bytes, or a write refused); each resumes by itself.",
    )
    store_corrupt: Counter[str] = counted(
        "delaybridge_store_corrupt_records",
        "Stored records that failed their CRC when read; readable=true ones are "
        "dead-lettered as store-corrupt, readable=false ones skipped (logged).",
        Label("readable", values=("true", "false")),
    )
    transactions_committed: int = counted(
        "delaybridge_transactions_committed",
        "Exactly-once mode: transactions committed (one per commit interval with work).",
    )
    transactions_aborted: int = counted(
        "delaybridge_transactions_aborted",
        "Exactly-once mode: transactions aborted (their partitions restarted from the "
        "last commit).",
    )
    delivered_past_horizon: int = counted(
        "delaybridge_deliveries_past_horizon",
        "Messages delivered although some delay-topic partition's cancels up to their due "
        "time were not known yet: cancel_horizon.bound_ms let them go "
        "(docs/design/cancel-horizon.md). A cancel sent for them may have come too late.",
    )
    lateness_ms: list[int] = field(default_factory=list)
    """``produce time - due time`` of every delivered record (the lateness histogram's
    batch; a value below 0 also counts in ``early``)."""

    def drain(self) -> Tally:
        """The counts so far; this tally starts again from zero."""
        taken = copy.copy(self)
        fresh = Tally()
        for f in fields(self):
            setattr(self, f.name, getattr(fresh, f.name))
        return taken


def declarations() -> list[tuple[str, CounterDeclaration]]:
    """Every declared counter as (its :class:`Tally` field's name, its declaration), in
    field order."""
    return [(f.name, f.metadata[_DECLARATION]) for f in fields(Tally) if _DECLARATION in f.metadata]
